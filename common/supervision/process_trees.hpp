#pragma once

#include "common/base/fd.hpp"
#include "common/base/stop_signals.hpp"
#include "common/supervision/containment.hpp"
#include "common/supervision/launch_request.hpp"
#include "common/supervision/launcher.hpp"
#include "common/supervision/process_exit.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/supervision/supervised_tree.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace orch {

struct TreeOptions {
    ContainmentOptions containment;
    // This supervisor's directory under the containment scope, holding its
    // trees' leaves (the recorder uses its own process row's id). Recovery
    // tears down every leaf of a dead supervisor's group.
    std::string group;
    // Caps every tree's phase-2 wait, so a teardown is always bounded.
    std::chrono::milliseconds teardown_grace{10'000};
    // After SIGKILL, how long to wait for a tree to empty before giving up.
    std::chrono::milliseconds kill_timeout{5'000};
    // A child's stdout/stderr log keeps at most about this much on disk (see
    // log_bound.hpp).
    std::uint64_t max_log_bytes = 64ull << 20;
    // The owner's stop signals (not owned; must outlive the trees). A stop
    // request that arrives during a teardown (a second SIGTERM: the owner's
    // loop took the first) kills every tree still waiting at once. nullptr = none.
    StopSignals* stop_signals = nullptr;
};

// A leader reaped: its own exit, and where its output went.
struct LeaderExit {
    std::string id;
    ProcessExit exit;
    std::string end_reason; // exited | timed_out | killed_on_teardown
    std::filesystem::path stdout_path;
    std::filesystem::path stderr_path;
    // A wait() or teardown() is on the tree and collects its outcome.
    bool claimed = false;
};

// What ProcessTrees reports to its owner, on the owner's thread, from within
// whichever member is running (wait() and teardown() included: they block, and
// the owner's writes must go on meanwhile). What a callback throws propagates
// out of that member.
class TreeObserver {
public:
    virtual ~TreeObserver() = default;
    // A leader was reaped (its tree may still have members).
    virtual void leader_exited(const LeaderExit& exit) = 0;
    // An end the supervision decided without a reap of its own: a tree killed
    // by a teardown (end_reason killed_on_teardown, refining the exit reported
    // before), or one whose leader survived SIGKILL and was never reaped.
    virtual void end_decided(const std::string& id, const std::string& end_reason) = 0;
    // A tree is done (empty, or given up on) and forgotten by ProcessTrees.
    virtual void tree_finished(const ProcessOutcome& outcome) = 0;
    // After every pass over the events: the owner's own due work.
    virtual void events_handled() = 0;
    // When the owner next has due work (the timer wakes epoll_fd() for it);
    // nullopt: none.
    virtual std::optional<std::chrono::steady_clock::time_point> next_due() const = 0;
};

// A tree about to be launched: its id, its cookie, its child environment and
// its containment (a cgroup leaf, when the mode has them). Movable; dropping
// it removes the leaf.
class TreeSlot {
public:
    const std::string& id() const noexcept { return m_id; }
    const std::string& cookie() const noexcept { return m_cookie; }
    // The child's environment as recorded (child_environment: the request's
    // plus the cookie), without the private variables.
    const std::map<std::string, std::string>& env() const noexcept { return m_env; }
    // The leaf the tree will run in; nullopt in the fallback mode.
    std::optional<std::string> cgroup_path() const;

private:
    friend class ProcessTrees;
    std::string m_id;
    std::string m_cookie;
    std::map<std::string, std::string> m_env;
    std::optional<CgroupLeaf> m_leaf;
};

// A spawned tree not yet watched: its owner records it, then hands it to
// track(). Dropping it kills what runs in its leaf (a fallback tree is left to
// its own).
class StartedTree {
public:
    const ProcessIdentity& identity() const noexcept { return m_identity; }
    pid_t pgid() const noexcept { return m_pgid; }
    // Kills the tree through its leaf (when it has one), waits up to
    // kill_timeout for the leader, reaps it. For an owner that cannot record it.
    void abandon() noexcept;

private:
    friend class ProcessTrees;
    std::unique_ptr<SupervisedTree> m_tree;
    ProcessIdentity m_identity;
    pid_t m_pgid = 0;
    std::chrono::milliseconds m_kill_timeout{0};
};

// Launches, watches and ends process trees: containment (pidfd, cgroup leaf
// or the fallback's sweep), pidfd/epoll watch, timeouts, the three-phase
// teardown, leftovers of exited leaders, adopted orphans. Knows nothing of the
// database: it reports what happens to a TreeObserver (optional) and as
// ProcessOutcome values. Single-threaded: call every member from the thread
// that owns it. It is the one reaper of this process: it becomes the child
// subreaper and reaps every child that exits, so the owning process must not
// wait for children itself. Destruction, unless the owner called close(),
// tears down every tree still running with the observer no longer told
// (bounded by teardown_grace + kill_timeout), stops the orphans adopted from
// them and removes its group; it never throws.
class ProcessTrees {
public:
    using Clock = std::chrono::steady_clock;

    // Probes containment, becomes the child subreaper. `observer` (not owned;
    // may be null) must outlive every call but the destructor. Throws
    // std::system_error on failure.
    ProcessTrees(TreeOptions options, TreeObserver* observer);
    ~ProcessTrees();
    ProcessTrees(const ProcessTrees&) = delete;
    ProcessTrees& operator=(const ProcessTrees&) = delete;

    // Launch, in three steps so that the owner can record the tree in between:
    // prepare() creates the log directory and picks the containment (a spare
    // leaf, or a new one); start() writes cmd.sh (logging a failure) and
    // spawns, with `unrecorded_env` added to the request's private
    // environment; track() watches it. A child that cannot be started is a
    // value (SpawnFailure). Blocks only for the spawn. Throws std::system_error
    // (and what std::filesystem throws).
    TreeSlot prepare(const LaunchRequest& request, std::string id, std::string cookie);
    std::variant<StartedTree, SpawnFailure> start(TreeSlot slot, const LaunchRequest& request,
                                                  const std::map<std::string, std::string>& unrecorded_env = {});
    void track(StartedTree started);

    // Foreground wait: blocks until the tree's leader exits, or until
    // `timeout` (default: the request's timeout_s; none = forever) when it
    // escalates: SIGTERM+SIGCONT to the leader, `grace` (default
    // teardown_grace), then SIGKILL of the whole tree. Leftovers of a leader
    // that exited are killed. Throws std::out_of_range for an unknown id.
    ProcessOutcome wait(const std::string& id, std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                        std::optional<std::chrono::milliseconds> grace = std::nullopt);

    // wait()'s timeout escalation for every tree past its timeout_s that no
    // wait() or teardown() has claimed, by signals alone: SIGTERM+SIGCONT to
    // the leader, then SIGKILL of the tree teardown_grace later (not needed
    // when the SIGTERM ended every process). It neither reaps nor reports, so
    // it is safe to call while another member is blocked (the recorder runs it
    // through a database outage). A later wait() on the tree goes on from
    // where it stands, and its outcome says timed_out. Returns when it next
    // has something to do (nullopt: nothing). Never blocks.
    std::optional<Clock::time_point> keep_deadlines();

    // Three-phase teardown of the given trees (all tracked ones if empty), in
    // parallel. Each tree gets deadline = min(remaining timeout, grace);
    // blocks until every tree is gone or given up on.
    std::vector<ProcessOutcome> teardown(const std::vector<std::string>& ids = {},
                                         std::optional<std::chrono::milliseconds> grace = std::nullopt,
                                         TermTarget term_target = TermTarget::leader);

    // Readable when process_events() has work: add it to a poll/epoll loop.
    int epoll_fd() const noexcept { return m_epoll.get(); }
    // Reaps exited processes (own and adopted) and reports them, then lets
    // the observer do its due work; bounds the logs. Blocks on nothing of its
    // own.
    void process_events();
    // Reaps every child that has exited: leaders (reported), adopted orphans.
    void reap_children();
    // Outcomes of trees that ended on their own since the last call.
    std::vector<ProcessOutcome> take_finished();
    // Children of this process that no tree leads and that run inside its
    // containment scope: descendants of its trees reparented to it (it is
    // their subreaper) because the supervisor between them died, SIGKILLed by
    // a teardown say, while the database was down and no recovery could run.
    // SIGTERM (and SIGCONT), teardown_grace, then SIGKILL, for the ones found
    // on the way too (a killed worker's hooks are adopted in turn), until none
    // is left or kill_timeout has passed after the SIGKILL. Our own children
    // cannot be reused pids before we reap them: signalled by pid. In cgroup
    // modes only (fallback trees are found by recovery, by cookie). Reports
    // nothing.
    void stop_adopted_orphans();
    // SIGKILLs every tree (a shutdown that failed); logs what it cannot kill.
    void kill_all() noexcept;
    // Forgets every tree and spare leaf (a leaf kills what is left in it),
    // then removes the group directory and, when no other supervisor uses it,
    // the scope directory. The destructor does nothing more after it: an
    // owner that shut down itself (teardown, stop_adopted_orphans, close)
    // is not second-guessed.
    void close();

    // Called about once a second while wait() or teardown() block: the owner
    // renews its lease there. An exception it throws is logged and dropped.
    // Empty to remove.
    void set_while_blocked(std::function<void()> task);
    // The observer's due time changed: the timer is armed again.
    void rearm();

    bool is_running(const std::string& id) const;
    // True when the leader has exited but left processes behind in its tree
    // and no wait() or teardown() has claimed it yet. A foreground owner then
    // calls wait(id, 0ms): the leftovers are killed and the outcome is the
    // leader's own, not a timeout.
    bool left_processes(const std::string& id) const;
    std::vector<std::string> running() const;
    // Trees whose leader has not been reaped yet.
    std::vector<std::string> unreaped() const;
    ContainmentMode containment_mode() const noexcept { return m_containment.mode(); }
    const Containment& containment() const noexcept { return m_containment; }
    const std::string& boot_id() const noexcept { return m_boot_id; }

private:
    SupervisedTree* find(const std::string& id);
    void on_leader_exit(SupervisedTree& tree, const ProcessExit& exit);
    void handle_events();
    bool fast_stop_requested() const;
    void bound_logs(const SupervisedTree& tree);
    void finish(SupervisedTree& tree, bool tree_empty);
    void collect_finished();
    void wait_until(Clock::time_point until);
    void arm_timer(Clock::time_point now);
    ProcessOutcome outcome_of(const SupervisedTree& tree) const;

    TreeOptions m_options;
    TreeObserver* m_observer;
    Containment m_containment;
    std::string m_boot_id;
    Fd m_epoll;
    Fd m_timer;
    std::map<std::string, std::unique_ptr<SupervisedTree>> m_trees;
    // Empty cgroup2 leaves of finished trees (not killed), handed to the next
    // launches. A leaf keeps the name of the first tree that used it; each row
    // records the path it ran in, and recovery tears down every leaf of a dead
    // supervisor's group, whatever its name.
    std::vector<CgroupLeaf> m_spare_leaves;
    static constexpr std::size_t k_max_spare_leaves = 8;
    std::vector<ProcessOutcome> m_finished;       // for take_finished()
    std::map<std::string, ProcessOutcome> m_done; // for wait() and teardown()
    std::function<void()> m_while_blocked;
    Clock::time_point m_next_blocked_task{};
    Clock::time_point m_next_log_check;
    std::set<std::string> m_bounded_logs; // logs already reported as over their limit
    bool m_closed = false;
};

} // namespace orch
