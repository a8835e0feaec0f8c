#pragma once

#include "common/base/fd.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace orch {

// A file written under a temporary name in the directory of its destination
// and renamed over the destination by commit(): a reader sees the old file or
// the whole new one, never a part of it. Writes are buffered (64 KiB), so a
// large file is streamed, never held whole. Destroyed without commit() (an
// exception on the way), the temporary file is removed and the destination is
// left as it was. Not thread-safe; every call blocks on the file system.
class AtomicFile {
public:
    // Creates "<destination>.tmp.<pid>" (mode 0644, replacing a leftover of the
    // same name). The directory must exist. Throws std::system_error.
    explicit AtomicFile(std::filesystem::path destination);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    // Appends `bytes`. Throws std::system_error when a write fails.
    void write(std::string_view bytes);
    AtomicFile& operator<<(std::string_view bytes)
    {
        write(bytes);
        return *this;
    }
    // Writes what is buffered, with `durable` fsyncs the file, then renames it
    // over the destination. Throws std::system_error (the temporary is removed).
    void commit(bool durable = false);

    const std::filesystem::path& destination() const { return m_destination; }

private:
    void flush();

    std::filesystem::path m_destination;
    std::filesystem::path m_temporary;
    Fd m_fd;
    std::string m_buffer;
    bool m_committed = false;
};

} // namespace orch
