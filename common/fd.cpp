#include "common/fd.hpp"

#include <unistd.h>

namespace orch {

void Fd::reset(int fd) noexcept
{
    if (m_fd >= 0) {
        // close() may fail with EINTR on Linux, but the descriptor is released
        // anyway; retrying could close a descriptor another thread just got.
        ::close(m_fd);
    }
    m_fd = fd;
}

} // namespace orch
