#pragma once

#include "common/base/stop_signals.hpp"
#include "common/base/write_behind.hpp"
#include "common/db/database_outage.hpp"
#include "common/db/pending_statement.hpp"
#include "common/recorder/process_table.hpp"
#include "common/recorder/recovery.hpp"
#include "common/supervision/launch_request.hpp"
#include "common/supervision/process_trees.hpp"

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

namespace orch {

struct SupervisorOptions {
    std::string machine_id; // a machine row must exist
    // Row of the supervising process itself; when absent one is inserted
    // (status running, with this process's identity).
    std::optional<std::string> self_row_id;
    std::string self_process_type = "worker";
    ContainmentOptions containment;
    std::chrono::milliseconds heartbeat_interval{10'000};
    // Caps every tree's phase-2 wait, so a teardown is always bounded.
    std::chrono::milliseconds teardown_grace{10'000};
    // After SIGKILL, how long to wait for a tree to empty before giving up.
    std::chrono::milliseconds kill_timeout{5'000};
    std::size_t tail_bytes = 4096;
    // A child's stdout/stderr log keeps at most about this much on disk; older
    // output is deallocated (see log_bound.hpp). The executables set it from
    // HOOK_LOG_MAX_BYTES (read_setting(setting::hook_log_max_bytes)).
    std::uint64_t max_log_bytes = 64ull << 20;
    // How long a hook's exit is held for a later statement to carry it (see
    // Supervisor::take_held_exits).
    std::chrono::milliseconds exit_write_delay = k_write_behind_window;
    // The owner's stop signals (not owned; must outlive the supervisor). A stop
    // request that arrives during a teardown (a second SIGTERM: the owner's
    // loop took the first) kills every tree still waiting at once. The teardown
    // of the destructor, on a way out the owner's loop never finished (a
    // database outage given up on because of a stop, an error), takes the stop
    // pending then as that first one: its trees keep their grace. nullptr = none.
    StopSignals* stop_signals = nullptr;
};

// Process trees recorded as rows of the `process` table: ProcessTrees does the
// OS work (launch into containment, watch, deadlines, teardown, reaping) and
// reports what happens; this writes it. Single-threaded: call every member
// from the thread that owns it. Through ProcessTrees it is the one reaper of
// this process (the child subreaper), so the owning process must not wait for
// children itself. Destruction tears down every tree still running (bounded by
// teardown_grace + kill_timeout), then stops what its trees left adopted by it
// (ProcessTrees::stop_adopted_orphans, bounded the same way), writes what it
// still holds, and never throws. Every member that writes throws what libpqxx
// throws, unless it says otherwise; a lost connection is ridden out
// (database_outage.hpp) except inside wait() and teardown().
class Supervisor : private TreeObserver {
public:
    // Probes containment, registers or adopts the self row. Throws
    // std::system_error / pqxx exceptions on failure.
    Supervisor(pqxx::connection& conn, SupervisorOptions options);
    ~Supervisor() override;
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    // Inserts the row (queued; the statement also writes the held exits),
    // spawns, records the identity (running).
    // A child that cannot be started is a value (failure set, row exited
    // with end_reason spawn_failed). Blocks only for the spawn itself.
    LaunchResult launch(const LaunchRequest& request);

    // Inserts the queued rows of processes to be launched later, all in one
    // statement: a snapshot's hooks cost one row write, not one per hook. Gives
    // every request without a row_id a new one; launch() of a request with the
    // same row_id (and the same argv and env) then starts it without a
    // statement of its own, and its leaf is recorded with its identity. Rows
    // never launched are closed with end_reason not_started by
    // release_reservations() (and the destructor); a launch that fails before
    // its spawn closes its row as spawn_failed. Blocks for one round trip.
    // Throws what libpqxx throws (nothing is reserved then).
    void reserve(std::vector<LaunchRequest>& requests);
    // Closes every reserved row not launched (not_started; the exits are held
    // like a hook's). Never touches the database itself.
    void release_reservations();
    // The same for those of `row_ids` that are reserved and not launched (the
    // rows of one snapshot, when those of the next are reserved too).
    void release_reservations(const std::vector<std::string>& row_ids);

    // ProcessTrees::wait, with the exits written before it returns. Never
    // waits for the database: through an outage the deadlines keep their time
    // and the exits it cannot write stay held (OutageWaitsDeferred). Throws
    // std::out_of_range for an unknown row.
    ProcessOutcome wait(const std::string& row_id,
                        std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                        std::optional<std::chrono::milliseconds> grace = std::nullopt);

    // ProcessTrees::keep_deadlines: signals alone, no reaping, no writes, so
    // it is safe while another member is blocked on the database. The
    // supervisor runs it through a database outage (an OutageTask), when its
    // owner's loop is blocked and cannot call wait() on time. Never blocks.
    std::optional<std::chrono::steady_clock::time_point> keep_deadlines() { return m_trees.keep_deadlines(); }

    // ProcessTrees::teardown; rows get the outcome (held through a database
    // outage, as in wait()).
    std::vector<ProcessOutcome> teardown(const std::vector<std::string>& row_ids = {},
                                         std::optional<std::chrono::milliseconds> grace = std::nullopt,
                                         TermTarget term_target = TermTarget::leader);

    // Readable when process_events() has work: add it to a poll/epoll loop.
    int epoll_fd() const noexcept { return m_trees.epoll_fd(); }
    // Reaps exited processes (own and adopted), records outcomes (a hook's
    // exit is held: see take_held_exits), writes what is due, heartbeats when
    // due. Never blocks on anything but the database (through an outage, up
    // to DB_OUTAGE_GRACE: database_outage.hpp).
    void process_events();
    // Outcomes of trees that ended on their own since the last call.
    std::vector<ProcessOutcome> take_finished() { return m_trees.take_finished(); }
    // Crash recovery for this machine and scope (cleanup_stale_running with
    // this supervisor's containment options and self row), then reaps the
    // killed orphans that were reparented to us. Call before launching.
    RecoveryReport recover(std::chrono::milliseconds grace = std::chrono::milliseconds(1000));
    // Updates heartbeat_at of the self row and every running supervised row
    // in one statement.
    void heartbeat();

    // A hook's exit (and one whose LaunchRequest::hold_exit says so) is not
    // written at once but held for exit_write_delay:
    // the next launch's insert carries it (one statement instead of two), or
    // it is written when the delay is up, by whichever member runs then
    // (process_events(), the owner's poll loop waking on epoll_fd()), together
    // with every other exit held by then. wait() and teardown() write theirs
    // before returning, and so does the destructor. Crash semantics are the
    // deferred running write's: a held exit lost with us leaves its row
    // queued or running, and recovery closes it.
    //
    // Hands the held exits over (process_table::exits_ctes and
    // exits_parameters write them) for the owner's own statement to write (a
    // snapshot's seal); the supervisor forgets them.
    std::vector<process_table::HeldExit> take_held_exits();
    // Writes every held exit now: one round trip when there are any.
    void write_held_exits();

    bool is_running(const std::string& row_id) const { return m_trees.is_running(row_id); }
    // Called about once a second while wait() or teardown() block, with no
    // statement of ours in flight: the owner renews its lease there, so a long
    // teardown (several timed-out hooks, workers given their stop grace) cannot
    // let it expire and have the work claimed by another worker meanwhile. An
    // exception it throws is logged and dropped: the teardown goes on. Empty to
    // remove; the owner removes it before it goes away.
    void set_while_blocked(std::function<void()> task);
    // ProcessTrees::left_processes: the leader exited, leaving processes in
    // its tree; the owner then calls wait(row_id, 0ms).
    bool left_processes(const std::string& row_id) const { return m_trees.left_processes(row_id); }
    std::vector<std::string> running() const { return m_trees.running(); }
    ContainmentMode containment_mode() const noexcept { return m_trees.containment_mode(); }
    const Containment& containment() const noexcept { return m_trees.containment(); }
    const std::string& self_row_id() const noexcept { return m_self_id; }

private:
    // TreeObserver: what the trees report, written as rows.
    void leader_exited(const LeaderExit& exit) override;
    void end_decided(const std::string& id, const std::string& end_reason) override;
    void tree_finished(const ProcessOutcome& outcome) override;
    void events_handled() override;
    std::optional<std::chrono::steady_clock::time_point> next_due() const override;

    // The queued row of `request` as row `row_id`, its child's environment
    // `env` (child_environment with its cookie `cookie`); no cgroup leaf:
    // launch() adds the one it picks.
    process_table::NewRow queued_row(const LaunchRequest& request, const std::string& row_id,
                                     const std::string& cookie, const std::map<std::string, std::string>& env) const;
    // launch() once the row id and cookie are settled; `reserved`: the row exists.
    LaunchResult launch_row(const LaunchRequest& request, LaunchResult result, const std::string& cookie,
                            bool reserved);

    pqxx::connection& m_conn;
    SupervisorOptions m_options;
    std::string m_self_id;
    std::chrono::steady_clock::time_point m_next_heartbeat;
    bool m_owns_self_row = false;
    // Trees whose exit is held (LaunchRequest::hold_exit, and every hook's),
    // until they finish.
    std::set<std::string> m_holds_exit;

    // A hook's running write is deferred by k_running_write_delay: one that ends
    // before is recorded queued -> exited in one statement (a round trip less per
    // short hook). Workers are recorded running at once: other processes'
    // recovery judges a worker's children by the worker's recorded identity.
    struct PendingRunning {
        ProcessIdentity identity;
        pid_t pgid = 0;
        std::chrono::steady_clock::time_point spawned;
        std::optional<std::string> cgroup_path; // a reserved row's leaf, recorded with the identity
    };
    std::map<std::string, PendingRunning> m_pending_running;
    // The write-behind window (common/base/write_behind.hpp; deferred_running.cpp).
    static constexpr std::chrono::milliseconds k_running_write_delay = k_write_behind_window;
    // Writes the deferred running rows that are due.
    void flush_due_running();
    // Rows inserted by reserve() and not launched yet: row id -> the cookie the
    // row records (the launched process must carry it).
    std::map<std::string, std::string> m_reservations;
    // Holds the exit of a reserved row that never started.
    void hold_unstarted(const std::string& row_id, const std::string& end_reason, const std::string& error);
    // Exits held back (see take_held_exits), oldest first, at most one per row.
    std::vector<process_table::HeldExit> m_held_exits;
    // Sends every held exit as m_in_flight once the oldest is due.
    void flush_due_exits();
    // Sends every held exit as m_in_flight (settling what was in flight first).
    void send_held_exits();
    // The held exits m_in_flight carries: held again if it fails.
    std::vector<process_table::HeldExit> m_in_flight_exits;
    // Holds `exits` again, taken for a statement that failed: ahead of the
    // ones held since (they are older), at most one per row (a later record
    // of the same row is merged into the older one, as record_exit does).
    void restore_held_exits(std::vector<process_table::HeldExit> exits) noexcept;
    // Held exits taken for one statement: held again when the guard goes
    // without written() (the statement threw, or never ran).
    struct TakenExits {
        Supervisor& supervisor;
        std::vector<process_table::HeldExit> exits;
        bool done = false;
        void written() noexcept { done = true; }
        ~TakenExits()
        {
            if (!done) {
                supervisor.restore_held_exits(std::move(exits));
            }
        }
    };
    // A leader's end record (with its identity when that was never written):
    // merged into an exit still held for the row (a teardown refining the
    // reason), held when `hold` (a hook's, unless a wait() is on it: then its
    // round trip overlaps the tree's cleanup), otherwise sent as m_in_flight,
    // which settle_write() completes.
    void record_exit(const std::string& row_id, const process_table::EndRecord& end, bool hold);
    // The one row write that may be in flight on m_conn. Every use of m_conn
    // settles it first, and no public member returns with it unsettled, so the
    // owner always finds the connection idle. wait() and teardown() go on with
    // a tree's cleanup while its exit write is on its way, and settle before
    // they return.
    std::optional<PendingStatement> m_in_flight;
    // The process trees, which report to this (TreeObserver). Declared after
    // everything its reports touch, so that it goes first.
    ProcessTrees m_trees;
    // keep_deadlines() while this thread waits for the database. The last
    // member: gone before any other.
    OutageTask m_outage_task{[this] { return keep_deadlines(); }};
    // Waits for m_in_flight. A lost connection is waited for (held exits held
    // again meanwhile), except under OutageWaitsDeferred, where it returns with
    // them held; otherwise throws what PendingStatement::finish throws.
    void settle_write();
    // Sends what is held and settles it, as a deferrable step: the end of
    // wait() and teardown().
    void write_held_exits_deferrable();
    // Runs a step that writes rows. Under OutageWaitsDeferred (wait(),
    // teardown()) a lost connection is not waited for: what the step would have
    // written stays held (exits, running writes, the heartbeat's due time) for a
    // later one, and the tree's deadlines keep their time. Otherwise the step
    // rides the outage out itself (database_outage.hpp).
    template <typename Step>
    static void deferrable(Step&& step)
    {
        try {
            step();
        } catch (const pqxx::broken_connection&) {
            if (!outage_waits_deferred()) {
                throw;
            }
        }
    }
    // Drains m_in_flight (ignoring its outcome) when a member that let it
    // run on leaves by an exception, so the owner still finds the connection idle.
    // The held exits it carried are held again: its outcome is unknown, and
    // writing an exit twice is harmless where losing it is not.
    struct InFlightGuard {
        Supervisor& supervisor;
        int exceptions = std::uncaught_exceptions();
        ~InFlightGuard()
        {
            if (std::uncaught_exceptions() > exceptions) {
                supervisor.m_in_flight.reset();
                supervisor.restore_held_exits(std::exchange(supervisor.m_in_flight_exits, {}));
            }
        }
    };
};

} // namespace orch
