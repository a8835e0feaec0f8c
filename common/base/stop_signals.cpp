#include "common/base/stop_signals.hpp"

#include "common/base/errors.hpp"

#include <cerrno>
#include <sys/signalfd.h>
#include <unistd.h>

namespace orch {

StopSignals::StopSignals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
        throw_errno("sigprocmask");
    }
    int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        throw_errno("signalfd");
    }
    m_fd.reset(fd);
}

StopSignals::~StopSignals()
{
    // The mask stays as it is (see the header): a request that arrives from here
    // to the exit stays pending and is discarded with the process.
    take();
}

int StopSignals::take()
{
    int n = 0;
    signalfd_siginfo info{};
    while (::read(m_fd.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        ++n;
    }
    m_count += n;
    return n;
}

} // namespace orch
