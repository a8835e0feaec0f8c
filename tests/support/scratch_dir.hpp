#pragma once

#include <filesystem>
#include <string>

namespace orch::test {

// A fresh directory $TMPDIR/<prefix>XXXXXX (mkdtemp; /tmp when TMPDIR is unset), owned for the object's lifetime
// and removed with everything under it on destruction. Keep prefixes short:
// PostgreSQL's Unix sockets live under data directories, and their paths are limited.
//
// Whatever runs in the directory (children, embedded clusters) must be gone before
// the owner is destroyed: declare the ScratchDir before what uses its path.
//
// With ORCH_KEEP_TEST_DIRS set the directory is kept for debugging and one line on
// stderr names it. Subdirectories a test left without owner permissions are made
// accessible first so that removal can descend; symlinks are never followed.
class ScratchDir {
public:
    // Throws std::system_error when mkdtemp fails.
    explicit ScratchDir(const std::string& prefix);
    // Never throws; a directory that cannot be removed is reported on stderr.
    ~ScratchDir();
    ScratchDir(ScratchDir&& other) noexcept;
    // Removes the directory this one owned, then takes over `other`'s.
    ScratchDir& operator=(ScratchDir&& other) noexcept;
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    // Empty once moved from or released.
    const std::filesystem::path& path() const { return m_path; }
    // So that a ScratchDir goes wherever a path is expected.
    operator const std::filesystem::path&() const { return m_path; }
    friend std::filesystem::path operator/(const ScratchDir& dir, const std::filesystem::path& rel)
    {
        return dir.m_path / rel;
    }

    // Gives up ownership: the directory stays on disk. Returns its path.
    std::filesystem::path release();

private:
    std::filesystem::path m_path;
};

} // namespace orch::test
