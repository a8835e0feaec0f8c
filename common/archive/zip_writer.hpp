#pragma once

#include <deque>
#include <filesystem>
#include <string>

struct zip;
struct zip_source;

// A ZIP file written with libzip, every member stored (not compressed): a WACZ
// keeps its WARC files byte for byte, so replay reads a record at its CDXJ
// offset straight out of the zip. libzip switches to ZIP64 by itself for
// members or archives past 4 GiB or 65535 members.
namespace orch {

class ZipWriter {
public:
    // Opens `file` for writing, replacing what is there. Throws
    // std::runtime_error naming the file and libzip's reason.
    explicit ZipWriter(const std::filesystem::path& file);
    // Discards the archive when close() did not run (or failed).
    ~ZipWriter();
    ZipWriter(const ZipWriter&) = delete;
    ZipWriter& operator=(const ZipWriter&) = delete;

    // Adds `source` (a file, read at close()) as `name` ('/'-separated).
    // Throws std::runtime_error (a duplicate name, a file libzip cannot stat).
    void add_file(const std::string& name, const std::filesystem::path& source);
    // Adds `bytes` as `name`; the bytes are kept until close().
    void add_bytes(const std::string& name, std::string bytes);

    // Writes the archive; blocks for as long as the members take to copy.
    // Throws std::runtime_error when writing fails (the file is then discarded).
    void close();

private:
    void store(const std::string& name, ::zip_source* source);

    std::filesystem::path m_file;
    ::zip* m_zip = nullptr;
    std::deque<std::string> m_buffers;  // the bytes of add_bytes, alive until close
};

} // namespace orch
