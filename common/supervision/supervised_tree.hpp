#pragma once

#include "common/supervision/cgroup_leaf.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/proc_sweep.hpp"
#include "common/supervision/process_exit.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>
#include <string>

namespace orch {

// One launched process and everything it forked: the leader's pidfd plus its
// containment (a cgroup leaf, or the fallback's cookie/pgid sweep). Owns both;
// destroying it kills what is left in a leaf (see CgroupLeaf). Not
// thread-safe. Signals go only through pidfds or the kernel cgroup.
class SupervisedTree {
public:
    using Clock = std::chrono::steady_clock;

    SupervisedTree(std::string id, std::string name, Pidfd leader, std::optional<CgroupLeaf> leaf,
                   SweepTarget sweep, std::optional<double> timeout_s, std::filesystem::path stdout_path,
                   std::filesystem::path stderr_path);

    const std::string& id() const noexcept { return m_id; }
    const std::string& name() const noexcept { return m_name; }
    const Pidfd& leader() const noexcept { return m_leader; }
    pid_t pid() const noexcept { return m_leader.pid(); }
    Clock::time_point started() const noexcept { return m_started; }
    std::optional<double> timeout_s() const noexcept { return m_timeout_s; }
    const std::filesystem::path& stdout_path() const noexcept { return m_stdout_path; }
    const std::filesystem::path& stderr_path() const noexcept { return m_stderr_path; }
    // cgroup.events of the leaf (EPOLLPRI on change), or -1.
    int events_fd() const noexcept { return m_leaf ? m_leaf->events_fd() : -1; }
    bool contained_by_cgroup() const noexcept { return m_leaf.has_value(); }

    const std::optional<ProcessExit>& leader_exit() const noexcept { return m_exit; }
    void set_leader_exit(const ProcessExit& exit) { m_exit = exit; }

    // True when the leader has been reaped and no other member is left.
    // Reads cgroup files or sweeps /proc; never blocks.
    bool empty() const;
    // True while a process of the tree runs; a leader that has exited (a
    // zombie not reaped yet) no longer counts. Reads cgroup files or sweeps
    // /proc; never blocks.
    bool has_members() const;
    // Signals the leader through its pidfd; false if it is already gone.
    bool signal_leader(int sig) const;
    // Signals every member (pidfd-verified); returns how many were hit.
    std::size_t signal_tree(int sig) const;
    // SIGKILLs every member, including ones born since any earlier signal,
    // and marks the tree `killed`.
    void kill_tree();
    // Removes the cgroup leaf once empty. Returns false if it is not.
    bool release();
    // Hands over the leaf of an empty tree for another tree to use (see
    // ProcessTrees::m_spare_leaves); nullopt without a leaf.
    std::optional<CgroupLeaf> take_leaf() { return std::exchange(m_leaf, std::nullopt); }

    // Remaining share of timeout_s at `now`; nullopt without a timeout.
    std::optional<Clock::duration> remaining(Clock::time_point now) const;

    // Outcome bookkeeping, written by ProcessTrees.
    std::string end_reason = "exited";
    bool timed_out = false;
    bool killed = false;
    bool stop_signalled = false; // a SIGTERM was sent while the leader still ran
    // Set once its timeout's SIGTERM is sent: when the SIGKILL of the tree is
    // due. A wait() after ProcessTrees::keep_deadlines() goes on from there.
    std::optional<Clock::time_point> kill_at;
    bool claimed = false;  // a wait() or teardown() will collect the outcome
    bool owner_logs = false; // LaunchRequest::owner_logs

private:
    std::string m_id;
    std::string m_name;
    Pidfd m_leader;
    std::optional<CgroupLeaf> m_leaf;
    SweepTarget m_sweep;
    std::optional<double> m_timeout_s;
    std::filesystem::path m_stdout_path;
    std::filesystem::path m_stderr_path;
    Clock::time_point m_started = Clock::now();
    std::optional<ProcessExit> m_exit;
};

} // namespace orch
