#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace orch {

// How the fallback containment recognises the members of one hook tree in
// /proc: the cookie in its environment, or the hook's process group. A member
// must have started no earlier than the hook (pids and pgids can be reused).
struct SweepTarget {
    std::string cookie;
    std::optional<pid_t> pgid;
    std::uint64_t min_start_ticks = 0;
};

// Live (non-zombie) members of the tree, excluding the calling process.
// Reads /proc; never signals. Does not block beyond /proc reads.
std::vector<pid_t> find_tree_members(const SweepTarget& target);

// Signals every member through a pidfd opened before re-checking membership,
// so a pid reused in between is never hit. Repeats until a pass finds nobody
// new (fork storms), at most `max_passes`. Returns how many were signalled.
std::size_t sweep_signal(const SweepTarget& target, int sig, int max_passes = 64);

// SIGKILLs the tree until /proc shows no member (or `max_passes` sweeps).
// Returns true if the tree is empty afterwards.
bool sweep_kill_until_empty(const SweepTarget& target, int max_passes = 200);

} // namespace orch
