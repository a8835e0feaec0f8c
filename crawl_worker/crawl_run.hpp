#pragma once

#include "common/base/exit_codes.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/hook_plan.hpp"
#include "common/work/lease.hpp"
#include "common/db/notification_listener.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "crawl_worker/crawl_store.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch {

using CrawlHook = ConfiguredHook;

// One claimed crawl, from its Crawl hooks to its seal: runs the hooks, creates the
// seed snapshots, keeps up to `max_workers` snapshot_worker processes busy (each
// started on one claimed snapshot, then taking the next due ones itself), retries
// snapshots whose worker died, honours the crawl timeout and cancellation, then
// runs CrawlEnd hooks, tears down the background hooks and seals the crawl.
// Single-threaded; reacts to worker exits through the supervisor's pidfds.
class CrawlRun {
public:
    struct Context {
        CrawlRecord crawl;
        std::filesystem::path data_dir;
        std::filesystem::path crawl_dir;
        std::size_t max_workers = 8;
        int max_attempts = 3;
        std::chrono::milliseconds teardown_grace{10'000};
        std::chrono::milliseconds worker_stop_grace{30'000};
        std::string snapshot_worker_exe;
        std::vector<std::string> worker_args;        // extra argv for snapshot_worker (--data-dir ...)
        std::map<std::string, std::string> worker_env;     // recorded environment of workers
        std::map<std::string, std::string> worker_private_env; // e.g. DATABASE_URL: given, never recorded
        std::string machine_id;
        std::string self_row_id;
        ContainmentOptions containment; // for recovering the hooks of a worker that died
    };

    // Renews the lease while the supervisor blocks in a wait or a teardown
    // (Supervisor::set_while_blocked), until destroyed.
    CrawlRun(Context ctx, Supervisor& supervisor, CrawlStore& store, Lease& lease, pqxx::connection& conn,
             StopSignals& stop);
    ~CrawlRun();
    CrawlRun(const CrawlRun&) = delete;
    CrawlRun& operator=(const CrawlRun&) = delete;

    // ok = sealed; interrupted = stopped by a signal, or paused by an operator (the
    // running snapshots finished first), crawl released; config_error = a snapshot
    // worker refused its configuration, crawl released; lease_lost.
    ExitCode run(const std::vector<CrawlHook>& crawl_hooks, const std::vector<CrawlHook>& end_hooks);

private:
    enum class Stop { none, paused, signal, refused, cancelled, timed_out, failed };

    // Runs the hooks of one event in step order; returns false if a required hook failed.
    bool run_hooks(const std::vector<CrawlHook>& hooks, const char* event);
    std::string launch_hook(const CrawlHook& h, bool background);
    void spawn_due_workers();
    // How long the run loop waits at most before it claims again: 1 s, or a
    // quarter of the crawl's host_delay_s (at least 50 ms), so that a host whose
    // delay has passed gets its next snapshot about then, not a second later.
    std::chrono::milliseconds claim_interval() const;
    void on_worker_exit(const ProcessOutcome& outcome);
    // Tears down the hooks of snapshot workers that died (process rows only); returns how many trees.
    int recover_orphans();
    void pump(std::chrono::steady_clock::time_point until);
    // Reads the crawl's row (cancel, pause, resume) and its timeout into m_stopping.
    void check_limits();
    void stop_workers();
    // After the crawl's lease was lost: stops the workers (as on SIGTERM) and
    // tears down the hooks of any that died, writing nothing for the crawl.
    void abandon_workers();
    std::chrono::steady_clock::time_point crawl_deadline() const;

    Context m_ctx;
    Supervisor& m_supervisor;
    CrawlStore& m_store;
    Lease& m_lease;
    pqxx::connection& m_conn;
    StopSignals& m_stop;
    NotificationListener m_cancel_listener;
    std::map<std::string, std::string> m_workers;       // process row id -> the snapshot it was started with
    std::vector<std::string> m_background;              // background crawl hook rows
    std::map<std::string, ProcessOutcome> m_hook_exits; // foreground hook rows that ended
    std::map<std::string, int> m_deaths;                // snapshot id -> its workers that died in this run
    Stop m_stopping = Stop::none;
    bool m_finishing = false; // CrawlEnd stage: cancellation and the crawl timeout no longer apply
    bool m_seal_prepared = false; // CrawlStore::prepare_seal done
    std::string m_stop_reason;
    std::chrono::steady_clock::time_point m_started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point m_next_check = std::chrono::steady_clock::now();
};

} // namespace orch
