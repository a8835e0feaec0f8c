#include "snapshot_worker/snapshot_worker.hpp"

#include "common/app/worker_startup.hpp"
#include "common/supervision/containment.hpp"
#include "common/db/database.hpp"
#include "common/db/database_outage.hpp"
#include "common/work/host_rules.hpp"
#include "common/base/env_map.hpp"
#include "common/config/env_setting.hpp"
#include "common/base/errors.hpp"
#include "common/hooks/hook_env.hpp"
#include "common/hooks/hook_plan.hpp"
#include "common/base/ids.hpp"
#include "common/work/lease.hpp"
#include "common/base/log.hpp"
#include "common/db/machine.hpp"
#include "common/db/migrate.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/hooks/plugin_roots.hpp"
#include "common/recorder/self_registration.hpp"
#include "common/config/settings.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "common/work/url_filter.hpp"
#include "snapshot_worker/continuing_run.hpp"
#include "snapshot_worker/snapshot_batch.hpp"
#include "snapshot_worker/snapshot_run.hpp"
#include "snapshot_worker/snapshot_store.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <utility>

namespace orch {

ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options)
{
    auto snapshot_id = require_uuid(options.snapshot_id, "snapshot id");
    WorkerStartup startup(common, options.process_id);
    auto& stop = startup.stop();
    const auto& data_dir = startup.data_dir();
    auto& conn = startup.conn();
    log::set_context("snapshot", snapshot_id);

    auto store = std::make_unique<SnapshotStore>(conn, snapshot_id);
    store->set_index_dir(data_dir / "snapshots" / snapshot_id);
    auto snapshot = store->load();
    if (!snapshot) {
        throw NotFound(fmt::format("snapshot {} not found", snapshot_id));
    }
    if (snapshot->status == "sealed" && !options.continue_with_crawl) {
        log::info("snapshot already sealed; nothing to do");
        return ExitCode::ok;
    }
    // Plugin problems surface here, before the snapshot is claimed: bad configuration changes nothing.
    // Every snapshot of a crawl has the crawl's configuration: one plan serves them all.
    WorkerScope scope;
    auto hooks = plan_hooks(plugin_roots(options.plugins_dir), snapshot->crawl_config, {"Snapshot"});
    // Their environments too: everything in them but SNAP_DIR is the crawl's.
    const auto inherited = inherited_environment();
    const HookContext crawl_context{data_dir, data_dir / "crawls" / snapshot->crawl_id, std::nullopt};
    for (auto& h : hooks["Snapshot"]) {
        auto env = build_hook_env(h.config, crawl_context, inherited);
        scope.hooks.push_back(HookSetup{std::move(h.hook), std::move(h.config), std::move(env)});
    }
    // All of them, also those only a crawl worker reads: one rule for every executable.
    // From here on a lost connection is waited for (database_outage.hpp), hooks running on.
    startup.check_settings();
    UrlFilter filter(snapshot->crawl_config, CrawlScope(snapshot->scope, snapshot->seeds));
    scope.filter = &filter;
    scope.parallelism = static_cast<std::size_t>(read_int_setting(setting::hook_parallelism));
    scope.teardown_grace = std::chrono::milliseconds(
        static_cast<long long>(read_int_setting(setting::teardown_grace)) * 1000);
    scope.data_dir = data_dir;
    const auto ttl = lease_ttl_from_env();
    const auto max_log_bytes = read_setting(setting::hook_log_max_bytes);
    scope.max_snapshots = read_int_setting(setting::snapshot_worker_max_snapshots);
    scope.ttl = ttl;
    // The machine's default per-host rules govern a crawl that has none of its own.
    const auto host_rules = machine_host_rules();
    apply_host_rules(conn, host_rules);
    snapshot->host_limited = snapshot->host_limited || host_rules.any();
    // Batches (snapshot_batch.hpp) only for a crawl without per-host rules (its
    // claims go one at a time, under its claim lock), and only where a death can
    // be retried (SNAPSHOT_MAX_ATTEMPTS above 1): the snapshots of a batch its
    // worker died in are each charged the death, and must be able to afford it.
    scope.batch_size = snapshot->host_limited || read_int_setting(setting::snapshot_max_attempts) < 2
                           ? 1
                           : read_int_setting(setting::snapshot_worker_batch);

    SelfRegistration reg;
    reg.worker_type = "snapshot";
    reg.crawl_id = snapshot->crawl_id;
    reg.snapshot_id = snapshot_id;
    const auto& self = startup.register_self(reg);
    if (options.continue_with_crawl && !self.parent_id) {
        close_self(conn, self, to_int(ExitCode::usage));
        throw Error(ExitCode::usage, "--continue is for snapshot workers started by a crawl worker (their process "
                                     "row names the crawl worker, whose crawl lease fences their claims)");
    }

    ExitCode code = ExitCode::internal_error;
    int taken = 0;
    try {
        // Spawned by a crawl worker, our adopted row already holds the lease (claimed in
        // a batch, attempt counted): taken as granted when the crawl worker said when
        // it claimed, else confirmed by adopt(). Run by hand, we claim it ourselves.
        std::optional<Lease> lease;
        if (snapshot->status != "sealed" && !self.owned && options.lease_claimed_at_ns) {
            const Lease::Clock::time_point claimed_at{std::chrono::nanoseconds(*options.lease_claimed_at_ns)};
            lease = Lease::granted(LeaseTable::snapshot, snapshot_id, self.id, ttl, options.attempt, claimed_at);
        } else if (snapshot->status != "sealed") {
            lease = Lease::adopt(conn, LeaseTable::snapshot, snapshot_id, self.id, ttl);
            if (!lease) {
                lease = Lease::claim(conn, LeaseTable::snapshot, snapshot_id, self.id, ttl);
            }
        }
        if (!lease && !options.continue_with_crawl) {
            log::warn("snapshot is leased by another worker (or no longer runnable); not running it");
            code = ExitCode::lease_lost;
            close_self(conn, self, to_int(code));
            return code;
        }
        Supervisor supervisor(conn, startup.supervisor_options(scope.teardown_grace, max_log_bytes));
        SnapshotBatch batch(conn, supervisor);
        // On the way out, whatever the batch holds: the held seals are written
        // (their snapshots ran to their end), the claims not started go back.
        const auto settle_batch = [&] {
            batch.seal_held();
            batch.release_ahead();
        };
        try {
            code = run_continuing(conn, supervisor, stop, scope, batch, options, self, *snapshot, store, lease, taken);
        } catch (const LeaseLost&) {
            settle_batch();
            throw;
        }
        settle_batch();
    } catch (const LeaseLost& e) {
        log::warn(e.what());
        code = ExitCode::lease_lost;
    }
    if (options.continue_with_crawl) {
        log::info("snapshot worker done", {{"snapshots", std::to_string(taken)}});
    }
    close_self(conn, self, to_int(code));
    return code;
}

} // namespace orch
