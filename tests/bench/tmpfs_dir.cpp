#include "tests/bench/tmpfs_dir.hpp"

#include <string>
#include <system_error>

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/statfs.h>

namespace orch::bench {

TmpfsDir::TmpfsDir()
{
    struct statfs info {};
    std::string templ = "/dev/shm/orch-bench-XXXXXX";
    if (::statfs("/dev/shm", &info) == 0 && info.f_type == TMPFS_MAGIC && ::mkdtemp(templ.data()) != nullptr) {
        m_path = templ;
    }
}

TmpfsDir::~TmpfsDir()
{
    std::error_code ec;
    if (!m_path.empty()) {
        std::filesystem::remove_all(m_path, ec);
    }
}

} // namespace orch::bench
