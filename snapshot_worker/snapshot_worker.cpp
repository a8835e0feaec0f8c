#include "snapshot_worker/snapshot_worker.hpp"

#include "common/database.hpp"
#include "common/env_map.hpp"
#include "common/errors.hpp"
#include "common/hook_plan.hpp"
#include "common/ids.hpp"
#include "common/lease.hpp"
#include "common/log.hpp"
#include "common/machine.hpp"
#include "common/migrate.hpp"
#include "common/plugin_config.hpp"
#include "common/plugin_roots.hpp"
#include "common/self_registration.hpp"
#include "common/stop_signals.hpp"
#include "common/supervisor.hpp"
#include "snapshot_worker/snapshot_run.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "snapshot_worker/url_filter.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace orch {

ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options)
{
    auto snapshot_id = require_uuid(options.snapshot_id, "snapshot id");
    std::optional<std::string> adopt;
    if (!options.process_id.empty()) {
        adopt = require_uuid(options.process_id, "process id");
    }
    StopSignals stop;
    auto data_dir = prepare_data_dir(common);
    auto db = Database::open(common, data_dir);
    auto& conn = db.conn();
    require_current_schema(conn);
    log::set_context("snapshot", snapshot_id);

    SnapshotStore store(conn, snapshot_id);
    auto snapshot = store.load();
    if (!snapshot) {
        throw NotFound(fmt::format("snapshot {} not found", snapshot_id));
    }
    if (snapshot->status == "sealed") {
        log::info("snapshot already sealed; nothing to do");
        return ExitCode::ok;
    }
    // Plugin problems surface here, before the snapshot is claimed: bad configuration changes nothing.
    std::vector<PlannedHook> planned;
    auto hooks = plan_hooks(plugin_roots(options.plugins_dir), snapshot->crawl_config, {"Snapshot"});
    for (auto& h : hooks["Snapshot"]) {
        planned.push_back(PlannedHook{std::move(h.hook), std::move(h.config), {}});
    }
    UrlFilter filter(snapshot->crawl_config);
    auto parallelism = static_cast<std::size_t>(env_int("HOOK_PARALLELISM", 1, 1, 64));
    auto teardown_grace = std::chrono::milliseconds(
        static_cast<long long>(env_int("TEARDOWN_GRACE", 10, 1, 3600)) * 1000);

    auto machine = detect_machine(optional_machine_id(common));
    register_machine(conn, machine, std::nullopt);
    SelfRegistration reg;
    reg.machine_id = machine.id;
    reg.adopt_id = adopt;
    reg.worker_type = "snapshot";
    reg.crawl_id = snapshot->crawl_id;
    reg.snapshot_id = snapshot_id;
    reg.data_dir = data_dir.string();
    auto self = register_self(conn, reg);
    log::set_context("self", self.id);

    ExitCode code = ExitCode::internal_error;
    try {
        // Spawned by a crawl worker, our adopted row already holds the lease (claimed in
        // a batch, attempt counted); run by hand, we claim it ourselves.
        auto lease = Lease::adopt(conn, LeaseTable::snapshot, snapshot_id, self.id, lease_ttl_from_env());
        if (!lease) {
            lease = Lease::claim(conn, LeaseTable::snapshot, snapshot_id, self.id, lease_ttl_from_env());
        }
        if (!lease) {
            log::warn("snapshot is leased by another worker (or no longer runnable); not running it");
            code = ExitCode::lease_lost;
            close_self(conn, self, to_int(code));
            return code;
        }
        store.set_owner(self.id);
        SupervisorOptions sup;
        sup.machine_id = machine.id;
        sup.self_row_id = self.id;
        sup.containment.scope = containment_scope(data_dir.string());
        sup.teardown_grace = teardown_grace;
        sup.fast_stop_fd = stop.fd();
        Supervisor supervisor(conn, sup);

        std::vector<Hook> hooks;
        for (const auto& p : planned) {
            hooks.push_back(p.hook);
        }
        auto results = store.ensure_results(hooks);
        std::vector<PlannedHook> todo;
        for (auto& p : planned) {
            const auto& state = results.at(p.hook.id());
            p.result_id = state.id;
            // A rerun after a crash never repeats what already finished well.
            if (state.status == "succeeded" || state.status == "skipped" || state.status == "noresults") {
                continue;
            }
            todo.push_back(p);
        }
        SnapshotRun::Context ctx;
        ctx.snapshot = *snapshot;
        ctx.data_dir = data_dir;
        ctx.snap_dir = data_dir / "snapshots" / snapshot_id;
        ctx.crawl_dir = data_dir / "crawls" / snapshot->crawl_id;
        ctx.parallelism = parallelism;
        ctx.teardown_grace = teardown_grace;
        SnapshotRun run(ctx, supervisor, store, *lease, conn, stop, filter);
        log::info("running snapshot", {{"url", snapshot->url},
                                       {"hooks", std::to_string(todo.size())},
                                       {"attempt", std::to_string(lease->attempts())}});
        code = run.run(todo);
        if (code == ExitCode::ok) {
            auto outcome = store.seal();
            log::info("snapshot sealed", {{"outcome", outcome}});
        } else {
            lease->release(conn);
            log::warn("snapshot released for a later run");
        }
    } catch (const LeaseLost& e) {
        log::warn(e.what());
        code = ExitCode::lease_lost;
    }
    close_self(conn, self, to_int(code));
    return code;
}

} // namespace orch
