#pragma once

#include "common/supervision/pidfd.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace orch {

// Environment variable carrying the per-process cookie; inherited by the
// whole tree unless a descendant scrubs its environment.
inline constexpr const char* k_cookie_env_var = "ORCH_PROCESS_COOKIE";
// Environment variable carrying a spawned worker's own row id, with which it
// finds that row by key (register_self). Given to workers only, never recorded
// (not in the row's env, not in cmd.sh) and never inherited by their children.
inline constexpr const char* k_process_id_env_var = "ORCH_PROCESS_ID";

// What names one process forever on this machine: (boot_id, pid, start_ticks),
// made exact by the pidfs inode where the kernel has one, and tied to its
// launch by the cookie inherited through its environment.
struct ProcessIdentity {
    pid_t pid = 0;
    std::string boot_id;
    std::uint64_t start_ticks = 0;
    std::optional<std::uint64_t> pidfs_ino;
    std::optional<std::string> cookie;
};

// /proc/sys/kernel/random/boot_id, trimmed: changes at every boot, and is part
// of every process identity. Throws std::system_error if unreadable.
std::string read_boot_id();

// The fields of /proc/<pid>/stat that supervision needs.
struct ProcStat {
    char state = '?';
    pid_t ppid = 0;
    pid_t pgid = 0;
    std::uint64_t start_ticks = 0; // field 22, clock ticks since boot
};

// Reads /proc/<pid>/stat. nullopt if the process does not exist. Never throws
// for a vanished process; the comm field may contain ')' and spaces.
std::optional<ProcStat> read_proc_stat(pid_t pid);

// CLOCK_BOOTTIME now, in nanoseconds: the clock a process's start time is
// taken from. Never throws.
std::int64_t boottime_ns() noexcept;

// The start time /proc/<pid>/stat reports (field 22, clock ticks since boot) for
// a process the caller created between two boottime_ns() readings: exact when
// both readings fall in the same tick (the kernel stamps the child in between
// and truncates to ticks the same way), nullopt when a tick boundary lies
// between them (read /proc then). Saves a launch the open, read and close of
// /proc/<pid>/stat, which the kernel formats in full (52 fields) to give one.
std::optional<std::uint64_t> start_ticks_between(std::int64_t before_ns, std::int64_t after_ns) noexcept;

// Value of `name` in /proc/<pid>/environ; nullopt if absent, unreadable or the
// process is gone (zombies have an empty environment).
std::optional<std::string> read_environ_value(pid_t pid, std::string_view name);

// Identity of the process behind `pidfd`, read now. nullopt if it has exited.
std::optional<ProcessIdentity> capture_identity(const Pidfd& pidfd, const std::string& boot_id,
                                                std::optional<std::string> cookie);

enum class IdentityVerdict {
    same,         // the expected process is alive; the pidfd refers to it
    gone,         // no process with that pid, or it has exited
    reused,       // the pid belongs to another process now
    boot_changed, // the identity comes from another boot; nothing to check
};

struct VerifiedProcess {
    IdentityVerdict verdict = IdentityVerdict::gone;
    std::optional<Pidfd> pidfd; // set only for `same`
};

// Opens a pidfd for expected.pid FIRST, then checks boot id, start ticks and
// the pidfs inode (or, without one, the cookie), so the pidfd returned for
// `same` cannot refer to any other process. Never signals. Throws
// std::system_error only for unexpected syscall failures.
VerifiedProcess verify_identity(const ProcessIdentity& expected, const std::string& current_boot_id);

// verify_identity() reduced to the pidfd of a verified process.
std::optional<Pidfd> open_verified(const ProcessIdentity& expected, const std::string& current_boot_id);

std::string_view to_string(IdentityVerdict verdict);

} // namespace orch
