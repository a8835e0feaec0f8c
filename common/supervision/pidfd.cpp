#include "common/supervision/pidfd.hpp"

#include "common/base/errors.hpp"

#include <atomic>
#include <cerrno>

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace orch {
namespace {

constexpr long k_pidfs_magic = 0x50494446;

} // namespace

std::optional<Pidfd> Pidfd::open(pid_t pid)
{
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) {
        if (errno == ESRCH) {
            return std::nullopt;
        }
        throw_errno("pidfd_open");
    }
    return Pidfd(Fd(fd), pid);
}

bool Pidfd::send_signal(int sig) const
{
    if (::syscall(SYS_pidfd_send_signal, m_fd.get(), sig, nullptr, 0) == 0) {
        return true;
    }
    if (errno == ESRCH) {
        return false;
    }
    throw_errno("pidfd_send_signal");
}

bool Pidfd::has_exited() const
{
    pollfd p{m_fd.get(), POLLIN, 0};
    int n;
    do {
        n = ::poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        throw_errno("poll(pidfd)");
    }
    return n > 0;
}

std::optional<ProcessExit> Pidfd::try_reap() const
{
    siginfo_t info{};
    struct rusage usage{};
    long rc;
    do {
        // The system call, not glibc's wrapper: only it reports the resource
        // usage of what it reaps (wait4 cannot take a pidfd).
        rc = ::syscall(SYS_waitid, P_PIDFD, m_fd.get(), &info, WEXITED | WNOHANG, &usage);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        throw_errno("waitid(P_PIDFD)");
    }
    if (info.si_pid == 0) {
        return std::nullopt;
    }
    auto exit = ProcessExit::from_siginfo(info);
    exit.usage = ResourceUsage::from_rusage(usage);
    return exit;
}

std::optional<std::uint64_t> Pidfd::inode() const
{
    // Before pidfs, every pidfd shares the anon-inode inode, which would make
    // all processes look identical: only trust the inode on pidfs. Which of the
    // two a pidfd is depends on the running kernel alone: asked of the first
    // pidfd that answers, not again at every spawn.
    static std::atomic<int> on_pidfs{-1}; // -1 unknown, 0 no, 1 yes
    if (on_pidfs.load(std::memory_order_relaxed) < 0) {
        struct statfs fs{};
        if (::fstatfs(m_fd.get(), &fs) != 0) {
            return std::nullopt;
        }
        on_pidfs.store(static_cast<long>(fs.f_type) == k_pidfs_magic ? 1 : 0, std::memory_order_relaxed);
    }
    if (on_pidfs.load(std::memory_order_relaxed) == 0) {
        return std::nullopt;
    }
    struct stat st{};
    if (::fstat(m_fd.get(), &st) != 0) {
        throw_errno("fstat(pidfd)");
    }
    return static_cast<std::uint64_t>(st.st_ino);
}

} // namespace orch
