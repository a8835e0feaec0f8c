#pragma once

#include "common/base/exit_codes.hpp"
#include "common/work/lease.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "common/work/url_filter.hpp"
#include "snapshot_worker/planned_hook.hpp"
#include "snapshot_worker/snapshot_store.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch {

// Runs the planned hooks of one claimed snapshot step by step and records their
// results; the caller seals. Foreground hooks of a step run up to `parallelism`
// at a time and are awaited with their timeout; background hooks are tracked
// and torn down at the end. Throws LeaseLost when the lease is gone (after
// tearing down what it started).
class SnapshotRun {
public:
    struct Context {
        SnapshotRecord snapshot;
        std::filesystem::path snap_dir; // the hooks' output directories are under it
        std::size_t parallelism = 1;
        std::chrono::milliseconds teardown_grace{10'000};
        // Launch requests whose rows the caller reserved already
        // (Supervisor::reserve, with those of the snapshots after this one), by
        // hook id: launched as they are, not reserved again.
        std::map<std::string, LaunchRequest> reserved;
        // Work of the caller's that falls due while the hooks run (the held
        // seals of earlier snapshots, snapshot_batch.hpp): when (nullopt: none),
        // and what. Either may be empty.
        std::function<std::optional<std::chrono::steady_clock::time_point>()> side_work_due;
        std::function<void()> side_work;
    };

    // Renews the lease while the supervisor blocks in a wait or a teardown
    // (Supervisor::set_while_blocked), until destroyed.
    SnapshotRun(Context context, Supervisor& supervisor, SnapshotStore& store, Lease& lease, pqxx::connection& conn,
                StopSignals& stop, const UrlFilter& filter);
    ~SnapshotRun();
    SnapshotRun(const SnapshotRun&) = delete;
    SnapshotRun& operator=(const SnapshotRun&) = delete;

    // Returns ok when every hook ran (the snapshot may be sealed; the store may
    // still hold the last results, which the seal writes first), interrupted
    // when a stop signal cut it short (finished results written, unfinished
    // ones requeued). A cancelled
    // crawl reaches its snapshot workers as SIGTERM from the crawl worker.
    ExitCode run(const std::vector<PlannedHook>& hooks);

private:
    struct Running {
        const PlannedHook* planned;
        std::string row_id;
        std::chrono::steady_clock::time_point deadline;
        bool background;
    };

    // Starts a hook, or records it failed when it cannot start (a hook problem,
    // its directory, its spawn); rethrows LeaseLost and database errors.
    void launch(const PlannedHook& planned, bool background);
    // Throws when its argv is impossible.
    LaunchRequest launch_request(const PlannedHook& planned, bool background) const;
    // Builds the launch request of every hook that can start and writes all
    // their rows in one statement (Supervisor::reserve), or takes them from
    // Context::reserved; a hook whose request cannot be built is left to
    // launch() to record as failed.
    void reserve_rows(const std::vector<PlannedHook>& hooks);
    // Closes the rows reserved for this snapshot's hooks that did not start.
    void release_reserved();
    void wait_for_events(std::chrono::steady_clock::time_point until);
    void collect_finished();
    // Foreground hooks that exited but left processes behind: ended now (see Supervisor::left_processes).
    void end_leftovers();
    void finish(const std::string& row_id, const ProcessOutcome& outcome);
    // `stopped`: the worker's own stop SIGTERMed it, which does not count against it.
    void record(const PlannedHook& planned, const std::optional<ProcessOutcome>& outcome, const std::string& row_id,
                const std::string& start_error, bool stopped = false);
    // Tears down every running hook; records those whose work was done (see
    // the .cpp) and, with `requeue`, requeues the rest.
    void stop_everything(bool requeue);
    // Whether the hook's stdout already holds its ArchiveResult record.
    bool reported_result(const PlannedHook& planned, const std::string& row_id) const;
    std::size_t running_foreground() const;
    std::filesystem::path hook_dir(const PlannedHook& planned) const;

    Context m_ctx;
    Supervisor& m_supervisor;
    SnapshotStore& m_store;
    Lease& m_lease;
    pqxx::connection& m_conn;
    StopSignals& m_stop;
    const UrlFilter& m_filter;
    std::map<std::string, Running> m_running; // by process row id
    // Requests whose rows reserve_rows() wrote, by hook; launch() takes them.
    std::map<const PlannedHook*, LaunchRequest> m_reserved;
    bool m_stopping = false;
};

} // namespace orch
