#include "orchestrator/orchestrator_run.hpp"

#include "common/supervision/containment.hpp"
#include "common/db/database.hpp"
#include "common/db/database_outage.hpp"
#include "common/config/env_setting.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/hooks/hook_plan.hpp"
#include "common/work/lease.hpp"
#include "common/base/log.hpp"
#include "common/db/machine.hpp"
#include "common/db/migrate.hpp"
#include "common/hooks/plugin_roots.hpp"
#include "common/recorder/recovery.hpp"
#include "common/recorder/self_registration.hpp"
#include "common/config/settings.hpp"
#include "common/base/stop_signals.hpp"
#include "orchestrator/orchestrator_loop.hpp"
#include "orchestrator/orchestrator_metrics.hpp"
#include "orchestrator/runner_gate.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

namespace orch {

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
    const auto max_log_bytes = read_setting(setting::hook_log_max_bytes);
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
    // From here on a lost connection is waited for (database_outage.hpp), the crawl
    // workers running on; before, the run ends with exit 4 and nothing started.
    // The server forgot our gate with the session: taken again first, and should
    // another orchestrator hold it by then, we stop as if asked to (SIGTERM to
    // ourselves: the loop winds down as on any stop). The outage is journaled
    // once per machine, by us (workers only log it), once we have a row.
    std::optional<std::string> self_id;
    auto policy = stoppable_outage_policy(stop);
    policy.on_reconnect = [&gate, &conn, &self_id](std::chrono::milliseconds down, const std::string& error) {
        if (!gate.try_acquire()) {
            log::error("another orchestrator took the gate while the database was unreachable; "
                       "stopping");
            ::kill(::getpid(), SIGTERM);
        }
        if (!self_id) {
            return;
        }
        Event outage{"database.outage",
                     fmt::format("database unreachable for {} ms; ridden out, workers kept running",
                                 down.count())};
        outage.process_id = *self_id;
        outage.detail = {{"down_ms", down.count()}, {"error", error}};
        record_event(conn, "orchestrator", outage);
    };
    set_outage_policy(std::move(policy));
    // The previous holder may have crashed: close its rows before taking its place.
    RecoveryOptions ro;
    ro.containment.scope = containment_scope(data_dir.string());
    const auto leftovers = cleanup_stale_running(conn, machine.id, ro);

    SelfRegistration reg;
    reg.machine_id = machine.id;
    reg.process_type = "orchestrator";
    reg.data_dir = data_dir.string();
    auto self = register_self(conn, reg);
    self_id = self.id;
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
    OrchestratorLoop orchestrator(db, machine, data_dir, common, options, stop, lease_ttl, max_log_bytes);
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
