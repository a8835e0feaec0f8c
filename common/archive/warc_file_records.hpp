#pragma once

#include "common/archive/gzip_members.hpp"
#include "common/archive/warc_record.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// The records of one WARC file, `.warc.gz` (one gzip member per record) or
// plain `.warc`, each with where it lies in the file: a CDXJ line's offset and
// length.
namespace orch {

struct LocatedRecord {
    std::uint64_t offset = 0;  // in the file as stored (compressed offsets for .warc.gz)
    std::uint64_t length = 0;  // bytes in the file as stored
    WarcRecord record;
};

// Reads one file front to back. Blocking; not thread-safe.
class WarcFileRecords {
public:
    // Throws std::system_error when `file` cannot be opened.
    explicit WarcFileRecords(const std::filesystem::path& file);
    ~WarcFileRecords();
    WarcFileRecords(const WarcFileRecords&) = delete;
    WarcFileRecords& operator=(const WarcFileRecords&) = delete;

    // The next record, or nullopt at the end, a cut record or data that is not
    // WARC: notes() then says so (reading stops there). A gzip member that holds
    // no WARC header block is skipped with a note. Throws std::system_error
    // when a read fails.
    std::optional<LocatedRecord> next();

    // What was cut, skipped or unreadable, one sentence each, naming the file.
    const std::vector<std::string>& notes() const { return m_notes; }

private:
    std::optional<LocatedRecord> next_plain();

    std::filesystem::path m_file;
    std::unique_ptr<GzipMembers> m_members;  // for .warc.gz
    Fd m_fd;                                 // for .warc
    std::uint64_t m_size = 0;
    std::uint64_t m_offset = 0;
    bool m_done = false;
    std::vector<std::string> m_notes;
};

} // namespace orch
