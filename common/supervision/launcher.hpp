#pragma once

#include "common/supervision/pidfd.hpp"

#include <cstdint>
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
    int cgroup_dir_fd = -1;            // cgroup2 directory: born inside it (clone3) when >= 0
    int cgroup_procs_fd = -1;          // else this cgroup.procs is joined before exec, when >= 0
};

// How the child got into its cgroup.
enum class CgroupEntry { none, at_birth, joined_before_exec };

struct Spawned {
    Pidfd pidfd;
    pid_t pgid = 0; // == pid: the child leads its own process group
    CgroupEntry cgroup_entry = CgroupEntry::none;
    std::uint64_t start_ticks = 0; // as /proc/<pid>/stat field 22 has it
};

// The child could not be started (missing program, no permission, bad
// interpreter, unusable cwd or log file). `error` is an errno value.
struct SpawnFailure {
    int error = 0;
    std::string message;
};

// Starts spec.argv through Boost.Process v2 in its own process group, inside
// the cgroup when given (so every descendant is contained from birth): with
// CloneIntoCgroupLauncher when a cgroup2 directory is given and the kernel has
// clone3's CLONE_INTO_CGROUP (5.7+), else with the vfork launcher, the child
// writing itself into cgroup.procs before exec. stdin
// on /dev/null, stdout/stderr appended to the log files. Returns the child's
// pidfd; the child is NOT reaped and must be reaped by the caller
// (waitid P_PIDFD). Blocks only until exec succeeds or fails. Expected
// failures are returned as SpawnFailure; unexpected ones throw.
std::variant<Spawned, SpawnFailure> spawn_process(const SpawnSpec& spec);

} // namespace orch
