#include "common/base/fd.hpp"

#include <cerrno>

#include <fcntl.h>
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

std::optional<std::string> read_whole_file(const std::string& path)
{
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        return std::nullopt;
    }
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return std::nullopt;
        }
        if (n == 0) {
            return text;
        }
        text.append(buf, static_cast<std::size_t>(n));
    }
}

} // namespace orch
