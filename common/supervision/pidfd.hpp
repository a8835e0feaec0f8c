#pragma once

#include "common/base/fd.hpp"
#include "common/supervision/process_exit.hpp"

#include <cstdint>
#include <optional>

#include <sys/types.h>

namespace orch {

// Owns a pidfd: a handle on one process that can never refer to another
// process, even after the pid is reused. Move-only; closing it does not affect
// the process. Signal and reap only through this handle.
class Pidfd {
public:
    // Opens a pidfd for `pid`. Returns nullopt if no such process exists
    // (ESRCH). Throws std::system_error on any other failure. Does not block.
    static std::optional<Pidfd> open(pid_t pid);
    // Takes `fd`, a pidfd for `pid` the kernel returned when it created the
    // process (clone3 with CLONE_PIDFD): no open, and no window at all.
    static Pidfd adopt(Fd fd, pid_t pid) noexcept { return Pidfd(std::move(fd), pid); }

    pid_t pid() const noexcept { return m_pid; }
    int fd() const noexcept { return m_fd.get(); }

    // Sends `sig` to this process. Returns false if it has already exited
    // (ESRCH); throws std::system_error on other failures.
    bool send_signal(int sig) const;

    // True once the process has terminated (zombie or reaped). Non-blocking.
    bool has_exited() const;

    // Reaps the process if it is our child and has exited, with its resource
    // usage (ProcessExit::usage); nullopt while it runs. Throws std::system_error (ECHILD) if it is not our child or was
    // already reaped. Non-blocking.
    std::optional<ProcessExit> try_reap() const;

    // The pidfs inode, unique per process for the life of the boot on kernels
    // >= 6.9; nullopt on older kernels (where pidfds are anonymous inodes).
    std::optional<std::uint64_t> inode() const;

private:
    Pidfd(Fd fd, pid_t pid) noexcept : m_fd(std::move(fd)), m_pid(pid) {}

    Fd m_fd;
    pid_t m_pid = -1;
};

} // namespace orch
