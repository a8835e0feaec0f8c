#pragma once

#include "common/pidfd.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace orch {

// Everything the child gets. Nothing is inherited from the parent: not its
// environment, not its file descriptors, not its signal mask or dispositions.
struct SpawnSpec {
    std::vector<std::string> argv;  // argv[0] is searched in env's PATH if it has no '/'
    std::vector<std::string> envp;  // complete "KEY=value" list
    std::filesystem::path pwd;
    std::filesystem::path stdout_path; // created/truncated
    std::filesystem::path stderr_path;
    int cgroup_procs_fd = -1;          // joined before exec when >= 0
};

struct Spawned {
    Pidfd pidfd;
    pid_t pgid = 0; // == pid: the child leads its own process group
};

// The child could not be started (missing program, no permission, bad
// interpreter, unusable cwd or log file). `error` is an errno value.
struct SpawnFailure {
    int error = 0;
    std::string message;
};

// Starts spec.argv through Boost.Process v2 (vfork launcher) in its own process group, inside
// the cgroup when given (so every descendant is contained from birth), stdin
// on /dev/null, stdout/stderr appended to the log files. Returns the child's
// pidfd; the child is NOT reaped and must be reaped by the caller
// (waitid P_PIDFD). Blocks only until exec succeeds or fails. Expected
// failures are returned as SpawnFailure; unexpected ones throw.
std::variant<Spawned, SpawnFailure> spawn_process(const SpawnSpec& spec);

} // namespace orch
