#pragma once

#include "common/config/cli_options.hpp"
#include "common/supervision/containment.hpp"
#include "common/db/database.hpp"
#include "common/base/exit_codes.hpp"
#include "common/db/machine.hpp"
#include "common/db/notification_listener.hpp"
#include "common/config/sd_watchdog.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "orchestrator/run_options.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace orch {

// The orchestrator's main loop, once it is registered and holds the runner
// gate: claims due crawls and runs a crawl_worker for each within the limits,
// enqueues due schedules, judges worker exits (backoff, a crawl paused for its
// configuration), recovers what crashed processes left, feeds systemd's
// watchdog, and on SIGTERM stops its workers in order. Single-threaded; blocks
// in poll() between turns. Throws ConfigError when a one-shot run found a
// configuration refused, Error(internal_error) when a one-shot run leaves a crawl
// unfinished because its crawl worker failed, and what the database throws.
class OrchestratorLoop {
public:
    OrchestratorLoop(Database& db, const MachineIdentity& machine, std::filesystem::path data_dir,
                     const CommonOptions& common, const RunOptions& options, StopSignals& stop,
                     std::chrono::seconds lease_ttl, std::uint64_t max_log_bytes);

    // Runs until idle (one-shot) or until a stop signal (daemon); `self_id` is
    // the orchestrator's own process row. Returns ok, or interrupted when a stop
    // signal ended a one-shot run (a daemon stopped by a signal returns ok).
    ExitCode run(const std::string& self_id);

private:
    using Clock = std::chrono::steady_clock;

    void wait(NotificationListener& listener, Clock::time_point until);
    void spawn_workers();
    void on_worker_exit(const ProcessOutcome& outcome);
    // Crash recovery for this machine (orchestrator_recovery.cpp).
    void recover();
    void kill_row(const std::string& row_id);
    void report_status();
    void shutdown();

    Database& m_db;
    pqxx::connection& m_conn;
    MachineIdentity m_machine;
    std::filesystem::path m_data_dir;
    const CommonOptions& m_common;
    const RunOptions& m_options;
    StopSignals& m_stop;
    std::chrono::seconds m_lease_ttl;
    std::uint64_t m_max_log_bytes;
    ContainmentOptions m_containment;
    Supervisor* m_supervisor = nullptr;
    std::string m_self_id;
    std::map<std::string, std::string> m_workers; // worker row id -> crawl id
    std::map<std::string, int> m_failures;         // crawl id -> consecutive failed workers
    std::optional<std::string> m_config_error;
    std::optional<std::string> m_paused_for_config; // one-shot: a crawl paused, the others ran
    SdWatchdog m_watchdog;
    std::size_t m_reported_workers = 0; // STATUS= says "claiming due crawls" until a worker runs
};

} // namespace orch
