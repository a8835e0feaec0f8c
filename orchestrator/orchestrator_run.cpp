#include "orchestrator/orchestrator_run.hpp"

#include "common/containment.hpp"
#include "common/database.hpp"
#include "common/env_map.hpp"
#include "common/env_setting.hpp"
#include "common/errors.hpp"
#include "common/event_journal.hpp"
#include "common/hook_plan.hpp"
#include "common/lean_exec.hpp"
#include "common/lease.hpp"
#include "common/log.hpp"
#include "common/machine.hpp"
#include "common/migrate.hpp"
#include "common/notification_listener.hpp"
#include "common/plugin_roots.hpp"
#include "common/process_identity.hpp"
#include "common/process_table.hpp"
#include "common/recovery.hpp"
#include "common/sd_notify.hpp"
#include "common/sd_watchdog.hpp"
#include "common/self_registration.hpp"
#include "common/settings.hpp"
#include "common/stop_signals.hpp"
#include "common/supervisor.hpp"
#include "orchestrator/orchestrator_metrics.hpp"
#include "orchestrator/runner_gate.hpp"
#include "orchestrator/schedules.hpp"
#include "orchestrator/work_queue.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <poll.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

class Orchestrator {
public:
    Orchestrator(Database& db, const MachineIdentity& machine, std::filesystem::path data_dir,
                 const CommonOptions& common, const RunOptions& options, StopSignals& stop, std::chrono::seconds lease_ttl,
                 std::uint64_t max_log_bytes)
        : m_db(db), m_conn(db.conn()), m_machine(machine), m_data_dir(std::move(data_dir)), m_common(common),
          m_options(options), m_stop(stop), m_lease_ttl(lease_ttl), m_max_log_bytes(max_log_bytes)
    {
        m_containment.scope = containment_scope(m_data_dir.string());
    }

    ExitCode run(const std::string& self_id)
    {
        m_self_id = self_id;
        SupervisorOptions sup;
        sup.machine_id = m_machine.id;
        sup.self_row_id = self_id;
        sup.self_process_type = "orchestrator";
        sup.containment = m_containment;
        sup.max_log_bytes = m_max_log_bytes;
        // A second SIGTERM while crawl workers wind down kills them at once.
        sup.fast_stop_fd = m_stop.fd();
        Supervisor supervisor(m_conn, sup);
        m_supervisor = &supervisor;
        register_machine(m_conn, m_machine, std::string(to_string(supervisor.containment_mode())));
        NotificationListener crawl_due(m_conn, "crawl_due");
        recover();
        sd_notify("READY=1\nSTATUS=claiming due crawls");
        m_watchdog.feed();
        log::info("orchestrator ready", {{"mode", m_options.daemon ? "daemon" : "one-shot"},
                                         {"max_crawl_workers", std::to_string(m_options.max_crawl_workers)}});
        auto next_recovery = Clock::now() + m_options.recovery_interval;
        while (m_stop.count() == 0) {
            if (Clock::now() >= next_recovery) {
                recover();
                next_recovery = Clock::now() + m_options.recovery_interval;
            }
            enqueue_due_schedules(m_conn);
            if (!m_config_error) {
                spawn_workers();
            }
            if (!m_options.daemon && m_workers.empty() &&
                (m_config_error || !work_due_within(m_conn, m_options.idle_window))) {
                log::info("nothing due and nothing running; exiting");
                break;
            }
            report_status();
            auto timeout = m_options.daemon ? m_options.poll_interval : std::chrono::seconds(1);
            wait(crawl_due, std::min({Clock::now() + timeout, next_recovery, m_watchdog.next_due()}));
        }
        shutdown();
        m_supervisor = nullptr;
        if (m_config_error) {
            throw ConfigError(*m_config_error);
        }
        if (m_paused_for_config) {
            throw ConfigError(*m_paused_for_config);
        }
        return ExitCode::ok;
    }

private:
    void wait(NotificationListener& listener, Clock::time_point until)
    {
        // A NOTIFY that arrived while the loop ran its queries was read off the socket
        // by libpq and waits in its queue: poll() would not see it. Look first.
        bool notified = !listener.drain().empty();
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        pollfd fds[3] = {{m_supervisor->epoll_fd(), POLLIN, 0}, {m_stop.fd(), POLLIN, 0}, {listener.fd(), POLLIN, 0}};
        int rc = ::poll(fds, 3, notified ? 0 : static_cast<int>(std::clamp<long long>(ms + 1, 0, 60'000)));
        if (rc < 0 && errno != EINTR) {
            throw_errno("poll");
        }
        if (m_stop.take() > 0) {
            log::info("stop requested", {{"signals", std::to_string(m_stop.count())}});
        }
        listener.drain();
        m_supervisor->process_events();
        for (const auto& outcome : m_supervisor->take_finished()) {
            on_worker_exit(outcome);
        }
    }

    void spawn_workers()
    {
        auto room = static_cast<std::size_t>(m_options.max_crawl_workers) - std::min(m_workers.size(),
                                                                                    static_cast<std::size_t>(m_options.max_crawl_workers));
        if (room == 0) {
            return;
        }
        for (const auto& claim : claim_due_crawls(m_conn, room, m_lease_ttl)) {
            LaunchRequest req;
            req.row_id = claim.worker_row_id;
            req.argv = {sibling_executable("crawl_worker"), "--crawl-id", claim.crawl_id, "--data-dir",
                        m_data_dir.string(), "--max-snapshot-workers", std::to_string(m_options.max_snapshot_workers)};
            if (!m_options.plugins_dir.empty()) {
                req.argv.insert(req.argv.end(), {"--plugins-dir", m_options.plugins_dir});
            }
            req.env = current_environment();
            if (!m_common.machine_id.empty()) {
                req.env["MACHINE_ID"] = m_common.machine_id;
            }
            if (!m_db.embedded()) {
                req.private_env["DATABASE_URL"] = m_db.conninfo();
            }
            add_lean_exec_environment(req.private_env);
            req.pwd = m_data_dir;
            req.log_dir = m_data_dir / "crawls" / claim.crawl_id;
            req.name = "crawl_worker";
            req.process_type = "worker";
            req.crawl_id = claim.crawl_id;
            auto result = m_supervisor->launch(req);
            if (!result.started()) {
                log::error("cannot start crawl_worker", {{"crawl", claim.crawl_id}, {"error", result.failure->message}});
                release_crawl(m_conn, claim.crawl_id, claim.worker_row_id, std::chrono::seconds(5));
                continue;
            }
            m_workers[result.row_id] = claim.crawl_id;
            log::info("crawl worker started", {{"crawl", claim.crawl_id}, {"process", result.row_id},
                                               {"pid", std::to_string(result.pid)}});
        }
    }

    void on_worker_exit(const ProcessOutcome& outcome)
    {
        auto it = m_workers.find(outcome.row_id);
        if (it == m_workers.end()) {
            return;
        }
        auto crawl_id = it->second;
        m_workers.erase(it);
        bool clean = outcome.exit_code && !outcome.term_signal &&
                     (*outcome.exit_code == to_int(ExitCode::ok) || *outcome.exit_code == to_int(ExitCode::lease_lost) ||
                      *outcome.exit_code == to_int(ExitCode::interrupted) ||
                      *outcome.exit_code == to_int(ExitCode::not_found));
        log::info("crawl worker exited", {{"crawl", crawl_id}, {"process", outcome.row_id},
                                          {"exit_code", outcome.exit_code ? std::to_string(*outcome.exit_code) : ""},
                                          {"signal", outcome.term_signal ? std::to_string(*outcome.term_signal) : ""}});
        if (clean) {
            m_failures.erase(crawl_id);
            return;
        }
        if (outcome.exit_code == to_int(ExitCode::config) && !outcome.term_signal && crawl_paused(m_conn, crawl_id)) {
            // The crawl's own configuration was refused and its worker paused it: no
            // retry can help, and the other crawls are not affected. Its worker
            // journaled why; a one-shot run still ends with exit 3 to say so.
            m_failures.erase(crawl_id);
            log::error("crawl paused: its configuration is refused; fix it, then `orchestrator resume`",
                       {{"crawl", crawl_id}, {"process", outcome.row_id}});
            if (!m_options.daemon && !m_paused_for_config) {
                m_paused_for_config = fmt::format(
                    "crawl {} was paused: its configuration is refused (see `orchestrator show crawl {}`)", crawl_id,
                    crawl_id);
            }
            return; // it refused before claiming: nothing of it runs
        }
        // Back off before recovery frees the lease: recovery would make the crawl due
        // at once, and a worker that fails at start would be respawned in a hot loop.
        const int failures = ++m_failures[crawl_id];
        const auto backoff = std::chrono::seconds(std::min(300, 2 << std::min(failures - 1, 8)));
        release_crawl(m_conn, crawl_id, outcome.row_id, backoff);
        log::warn("crawl worker failed; retrying later",
                  {{"crawl", crawl_id}, {"failures", std::to_string(failures)},
                   {"retry_in_s", std::to_string(backoff.count())}});
        Event backed_off{"crawl.backed_off",
                         fmt::format("crawl worker failed ({}); retrying in {} s",
                                     outcome.term_signal ? fmt::format("signal {}", *outcome.term_signal)
                                     : outcome.exit_code ? fmt::format("exit {}", *outcome.exit_code)
                                                         : outcome.end_reason,
                                     backoff.count()),
                         crawl_id};
        backed_off.process_id = m_self_id;
        backed_off.detail = {{"worker", outcome.row_id}, {"failures", failures}, {"retry_in_s", backoff.count()}};
        record_event(m_conn, "orchestrator", backed_off);
        if (outcome.exit_code && *outcome.exit_code == to_int(ExitCode::config) && !m_options.daemon &&
            !m_config_error) {
            // Plugin configuration was valid at start, so this crawl's own config (or a
            // file changed since) is wrong: a person must fix it. A one-shot run lets
            // running crawls finish, claims nothing more, and says so with exit 3.
            m_config_error = fmt::format("crawl_worker for crawl {} refused its configuration (exit 3); see {}",
                                         crawl_id, (m_data_dir / "crawls" / crawl_id).string());
            log::error("stopping: a crawl worker found the configuration invalid", {{"crawl", crawl_id}});
        }
        // Its snapshot workers and their hooks are orphans now.
        recover();
    }

    // Crash recovery for this machine: ends stuck lease holders, tears down orphaned
    // trees, closes stale rows, and frees leases whose owner is gone.
    void recover()
    {
        for (const auto& row_id : stalled_lease_owners(m_conn, m_machine.id)) {
            kill_row(row_id);
        }
        RecoveryOptions ro;
        ro.containment = m_containment;
        ro.self_row_id = m_self_id;
        ro.grace = std::chrono::milliseconds(1000);
        // Trees nest (crawl worker → snapshot workers → hooks): a pass can orphan the next level.
        RecoveryReport total;
        for (int pass = 0; pass < 3; ++pass) {
            auto report = cleanup_stale_running(m_conn, m_machine.id, ro);
            if (m_supervisor != nullptr) {
                m_supervisor->process_events();
            }
            total.lost += report.lost;
            total.killed_on_recovery += report.killed_on_recovery;
            total.pid_reused += report.pid_reused;
            total.boot_changed += report.boot_changed;
            if (report.killed_on_recovery == 0 && report.lost == 0) {
                break;
            }
        }
        auto leases = release_dead_leases(m_conn);
        count_leases_recovered(leases.crawls, leases.snapshots);
        if (total.lost + total.killed_on_recovery + total.pid_reused + total.boot_changed + leases.crawls +
                leases.snapshots >
            0) {
            log::info("recovery", {{"rows_lost", std::to_string(total.lost)},
                                   {"trees_killed", std::to_string(total.killed_on_recovery)},
                                   {"pid_reused", std::to_string(total.pid_reused)},
                                   {"boot_changed", std::to_string(total.boot_changed)},
                                   {"crawl_leases_freed", std::to_string(leases.crawls)},
                                   {"snapshot_leases_freed", std::to_string(leases.snapshots)}});
            Event e{"recovery.cleaned",
                    fmt::format("recovery closed {} stale rows, killed {} orphaned trees, freed {} leases",
                                total.lost + total.pid_reused + total.boot_changed, total.killed_on_recovery,
                                leases.crawls + leases.snapshots)};
            e.process_id = m_self_id;
            e.detail = {{"rows_lost", total.lost},           {"trees_killed", total.killed_on_recovery},
                        {"pid_reused", total.pid_reused},    {"boot_changed", total.boot_changed},
                        {"crawl_leases_freed", leases.crawls}, {"snapshot_leases_freed", leases.snapshots}};
            record_event(m_conn, "orchestrator", e);
        }
        register_machine(m_conn, m_machine, std::nullopt);
    }

    // SIGKILLs the process a row names, only after proving it is still that process.
    void kill_row(const std::string& row_id)
    {
        auto boot_id = read_boot_id();
        for (const auto& row : process_table::live_rows(m_conn, m_machine.id)) {
            if (row.id != row_id || !row.identity || row.id == m_self_id) {
                continue;
            }
            if (auto fd = open_verified(*row.identity, boot_id)) {
                log::warn("killing a worker whose lease expired while it still ran (stopped or hung)",
                          {{"process", row_id}, {"pid", std::to_string(row.identity->pid)}});
                fd->send_signal(SIGKILL);
            }
        }
    }

    // systemd's watchdog is fed once per loop turn (a hung loop gets the service
    // restarted), and its STATUS= line says how many crawl workers run.
    void report_status()
    {
        m_watchdog.feed();
        if (m_workers.size() != m_reported_workers) {
            m_reported_workers = m_workers.size();
            sd_notify(fmt::format("STATUS={} crawl worker(s) running", m_reported_workers));
        }
    }

    void shutdown()
    {
        sd_notify("STOPPING=1");
        if (!m_workers.empty()) {
            std::vector<std::string> rows;
            for (const auto& [row, crawl] : m_workers) {
                rows.push_back(row);
            }
            // A second signal before this point takes the fast path.
            auto grace = m_stop.count() >= 2 ? std::chrono::milliseconds(1000)
                                             : std::chrono::milliseconds(m_options.stop_grace);
            log::info("stopping crawl workers", {{"count", std::to_string(rows.size())},
                                                 {"grace_ms", std::to_string(grace.count())}});
            for (const auto& outcome : m_supervisor->teardown(rows, grace)) {
                on_worker_exit(outcome);
            }
        }
        recover();
    }

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

} // namespace

ExitCode run_orchestrator(const CommonOptions& common, const RunOptions& options)
{
    StopSignals stop;
    auto data_dir = prepare_data_dir(common);
    // Every worker would refuse a broken plugin configuration (exit 3) after being
    // spawned for a claimed crawl; refusing here claims nothing and names the file.
    plan_hooks(plugin_roots(options.plugins_dir), nlohmann::json::object(), {"Crawl", "Snapshot", "CrawlEnd"});
    // Likewise the settings from the environment, the workers' included: read before
    // anything is written.
    check_settings();
    const auto lease_ttl = lease_ttl_from_env();
    const auto max_log_bytes = hook_log_max_bytes_from_env();
    auto db = Database::open(common, data_dir);
    auto& conn = db.conn();
    apply_migrations(conn);
    auto machine = detect_machine(optional_machine_id(common));
    register_machine(conn, machine, std::nullopt);

    RunnerGate gate(conn, machine.id, data_dir.string());
    std::optional<std::string> took_over_from;
    if (!gate.try_acquire()) {
        if (!options.takeover) {
            throw Error(ExitCode::already_running,
                        fmt::format("{} already runs for machine {} and data directory {}; use --takeover to "
                                    "replace it",
                                    gate.holder_description(), machine.id, data_dir.string()));
        }
        took_over_from = gate.holder_description();
        log::info("taking over from the running orchestrator", {{"holder", *took_over_from}});
        if (!gate.takeover(options.stop_grace + std::chrono::seconds(30))) {
            throw Error(ExitCode::already_running, "the running orchestrator did not stop in time");
        }
    }
    // The previous holder may have crashed: close its rows before taking its place.
    RecoveryOptions ro;
    ro.containment.scope = containment_scope(data_dir.string());
    const auto leftovers = cleanup_stale_running(conn, machine.id, ro);

    SelfRegistration reg;
    reg.machine_id = machine.id;
    reg.process_type = "orchestrator";
    reg.data_dir = data_dir.string();
    auto self = register_self(conn, reg);
    log::set_context("self", self.id);
    auto metrics = options.metrics_listen.empty()
                       ? nullptr
                       : start_orchestrator_metrics(options.metrics_listen, db.conninfo(), machine.id);
    Event started{"orchestrator.started",
                  fmt::format("orchestrator started ({}){}", options.daemon ? "daemon" : "one-shot",
                              took_over_from ? ", taking over from " + *took_over_from : std::string())};
    started.process_id = self.id;
    started.detail = {{"pid", ::getpid()}, {"daemon", options.daemon}, {"data_dir", data_dir.string()},
                      {"version", version_string("orchestrator")}};
    if (took_over_from) {
        started.detail["took_over_from"] = *took_over_from;
    }
    const int closed = leftovers.lost + leftovers.pid_reused + leftovers.boot_changed;
    if (closed + leftovers.killed_on_recovery > 0) {
        // What a crashed predecessor left behind, found at start.
        started.detail["leftover_rows_closed"] = closed;
        started.detail["leftover_trees_killed"] = leftovers.killed_on_recovery;
    }
    record_event(conn, "orchestrator", started);
    Orchestrator orchestrator(db, machine, data_dir, common, options, stop, lease_ttl, max_log_bytes);
    auto record_stop = [&](int exit_code, const std::string& why) {
        Event stopped{"orchestrator.stopped", fmt::format("orchestrator stopped (exit {}{})", exit_code, why)};
        stopped.process_id = self.id;
        stopped.detail = {{"exit_code", exit_code}, {"stop_signals", stop.count()}};
        record_event(conn, "orchestrator", stopped);
    };
    ExitCode code = ExitCode::internal_error;
    try {
        code = orchestrator.run(self.id);
    } catch (const Error& e) {
        record_stop(to_int(e.code()), std::string(": ") + e.what());
        throw;
    }
    record_stop(to_int(code), "");
    close_self(conn, self, to_int(code));
    return code;
}

} // namespace orch
