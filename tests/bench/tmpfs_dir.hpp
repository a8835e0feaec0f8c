#pragma once

#include <filesystem>

namespace orch::bench {

// A fresh directory on /dev/shm when that is a tmpfs (else none: path() empty),
// removed with its contents at the end, ORCH_KEEP_TEST_DIRS or not: deleting
// files on tmpfs slows nothing that runs later. For the context rows that take
// the disk out of a figure.
class TmpfsDir {
public:
    TmpfsDir();
    ~TmpfsDir();
    TmpfsDir(const TmpfsDir&) = delete;
    TmpfsDir& operator=(const TmpfsDir&) = delete;
    const std::filesystem::path& path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

} // namespace orch::bench
