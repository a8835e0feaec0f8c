#pragma once

#include "common/base/fd.hpp"

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

// A gzip file read as its members, one after another (zlib). A `.warc.gz` holds
// one WARC record per member, and a CDXJ line points at a member by its offset
// and compressed length, so each member comes with both.
namespace orch {

struct GzipMember {
    std::uint64_t offset = 0;         // of its first byte in the file
    std::uint64_t length = 0;         // compressed bytes, header and trailer included
    std::uint64_t inflated_size = 0;  // decompressed bytes
    std::string head;                 // the first min(inflated_size, head_limit) decompressed bytes
};

// Reads one file front to back. Blocking file reads; not thread-safe.
class GzipMembers {
public:
    // Opens `file`. Throws std::system_error when it cannot be opened, and
    // std::runtime_error when zlib cannot set up an inflate stream.
    explicit GzipMembers(const std::filesystem::path& file, std::size_t head_limit = 256 * 1024);
    ~GzipMembers();
    GzipMembers(const GzipMembers&) = delete;
    GzipMembers& operator=(const GzipMembers&) = delete;

    // The next complete member, or nullopt at the end. The end is also where a
    // member is cut short (a writer killed mid-record) or is not gzip at all:
    // problem() then says where and why; the members before it were complete.
    // Throws std::system_error when a read fails.
    std::optional<GzipMember> next();

    // Why reading stopped before the end of the file; nullopt at a clean end.
    const std::optional<std::string>& problem() const { return m_problem; }

private:
    // Reads more input into m_in; false at the end of the file.
    bool fill();

    std::filesystem::path m_file;
    Fd m_fd;
    std::size_t m_head_limit;
    z_stream m_zs{};
    std::vector<unsigned char> m_in;
    std::vector<unsigned char> m_out;
    std::uint64_t m_read = 0;  // bytes read from the file so far
    bool m_eof = false;
    bool m_done = false;
    std::optional<std::string> m_problem;
};

} // namespace orch
