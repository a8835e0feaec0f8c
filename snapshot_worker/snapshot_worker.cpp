#include "snapshot_worker/snapshot_worker.hpp"

#include "common/containment.hpp"
#include "common/database.hpp"
#include "common/database_outage.hpp"
#include "common/host_rules.hpp"
#include "common/env_map.hpp"
#include "common/env_setting.hpp"
#include "common/errors.hpp"
#include "common/hook_env.hpp"
#include "common/hook_plan.hpp"
#include "common/ids.hpp"
#include "common/lease.hpp"
#include "common/log.hpp"
#include "common/machine.hpp"
#include "common/migrate.hpp"
#include "common/plugin_config.hpp"
#include "common/plugin_roots.hpp"
#include "common/self_registration.hpp"
#include "common/settings.hpp"
#include "common/snapshot_claims.hpp"
#include "common/stop_signals.hpp"
#include "common/supervisor.hpp"
#include "common/url_filter.hpp"
#include "snapshot_worker/snapshot_run.hpp"
#include "snapshot_worker/snapshot_store.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <utility>

namespace orch {
namespace {

// What every snapshot run by this process shares: they all belong to one crawl.
struct WorkerScope {
    std::vector<HookSetup> hooks;
    const UrlFilter* filter = nullptr;
    std::size_t parallelism = 1;
    std::chrono::milliseconds teardown_grace{10'000};
    std::filesystem::path data_dir;
};

std::vector<Hook> planned_hooks(const WorkerScope& scope)
{
    std::vector<Hook> hooks;
    for (const auto& h : scope.hooks) {
        hooks.push_back(h.hook);
    }
    return hooks;
}

// Runs the hooks of one leased snapshot; the caller seals it when this returns
// ok. Anything else gives it back for a later run (interrupted). Throws
// LeaseLost when the lease is gone. `prepared`: its results, when the claim
// that leased it made them already (seal_and_claim_next); else they are made here.
ExitCode run_leased(pqxx::connection& conn, Supervisor& supervisor, StopSignals& stop, const WorkerScope& scope,
                    SnapshotStore& store, const SnapshotRecord& snapshot, Lease& lease,
                    std::optional<std::map<std::string, ResultState>> prepared)
{
    auto results = prepared ? std::move(*prepared) : store.ensure_results(planned_hooks(scope));
    std::vector<PlannedHook> todo;
    for (const auto& h : scope.hooks) {
        const auto& state = results.at(h.hook.id());
        // A rerun after a crash never repeats what already finished well.
        if (state.status == "succeeded" || state.status == "skipped" || state.status == "noresults") {
            continue;
        }
        todo.push_back(PlannedHook{h.hook, h.config, h.env, state.id});
    }
    SnapshotRun::Context ctx;
    ctx.snapshot = snapshot;
    ctx.data_dir = scope.data_dir;
    ctx.snap_dir = scope.data_dir / "snapshots" / snapshot.id;
    ctx.crawl_dir = scope.data_dir / "crawls" / snapshot.crawl_id;
    ctx.parallelism = scope.parallelism;
    ctx.teardown_grace = scope.teardown_grace;
    SnapshotRun run(ctx, supervisor, store, lease, conn, stop, *scope.filter);
    log::info("running snapshot", {{"url", snapshot.url},
                                   {"hooks", std::to_string(todo.size())},
                                   {"attempt", std::to_string(lease.attempts())}});
    auto code = run.run(todo);
    if (code != ExitCode::ok) {
        lease.release(conn);
        log::warn("snapshot released for a later run");
    }
    return code;
}

} // namespace

ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options)
{
    auto snapshot_id = require_uuid(options.snapshot_id, "snapshot id");
    std::optional<std::string> adopt;
    if (!options.process_id.empty()) {
        adopt = require_uuid(options.process_id, "process id");
    }
    StopSignals stop;
    // Spawned by a supervisor, whose connection worked a moment ago: a server
    // that refuses us is in an outage, not a wrong URL, and is waited for like
    // one (database_outage.hpp). Run by hand, a refusal ends the run at once.
    if (started_by_supervisor()) {
        set_outage_policy(stoppable_outage_policy(stop));
    }
    auto data_dir = prepare_data_dir(common);
    auto db = Database::open(common, data_dir);
    auto& conn = db.conn();
    require_current_schema(conn);
    log::set_context("snapshot", snapshot_id);

    auto store = std::make_unique<SnapshotStore>(conn, snapshot_id);
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
    check_settings();
    // From here on a lost connection is waited for (database_outage.hpp), hooks running on.
    set_outage_policy(stoppable_outage_policy(stop));
    UrlFilter filter(snapshot->crawl_config);
    scope.filter = &filter;
    scope.parallelism = static_cast<std::size_t>(read_int_setting(setting::hook_parallelism));
    scope.teardown_grace = std::chrono::milliseconds(
        static_cast<long long>(read_int_setting(setting::teardown_grace)) * 1000);
    scope.data_dir = data_dir;
    const auto ttl = lease_ttl_from_env();
    const auto max_log_bytes = hook_log_max_bytes_from_env();
    const int max_snapshots = read_int_setting(setting::snapshot_worker_max_snapshots);
    const auto crawl_id = snapshot->crawl_id;
    // The machine's default per-host rules govern a crawl that has none of its own.
    const auto host_rules = machine_host_rules();
    apply_host_rules(conn, host_rules);
    snapshot->host_limited = snapshot->host_limited || host_rules.any();

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
        SupervisorOptions sup;
        sup.machine_id = machine.id;
        sup.self_row_id = self.id;
        sup.containment.scope = containment_scope(data_dir.string());
        sup.teardown_grace = scope.teardown_grace;
        sup.max_log_bytes = max_log_bytes;
        sup.stop_signals = &stop;
        Supervisor supervisor(conn, sup);

        code = ExitCode::ok;
        // The results of the snapshot claimed by the last seal, made by that statement.
        std::optional<std::map<std::string, ResultState>> next_results;
        const auto hooks = planned_hooks(scope);
        for (;;) {
            std::optional<ClaimedSnapshot> next;
            if (lease) {
                store->set_owner(self.id);
                code = run_leased(conn, supervisor, stop, scope, *store, *snapshot, *lease,
                                  std::exchange(next_results, std::nullopt));
                ++taken;
                if (code != ExitCode::ok) {
                    break;
                }
                stop.take();
                const bool go_on = options.continue_with_crawl && taken < max_snapshots && stop.count() == 0;
                if (go_on) {
                    // The seal and the next claim in one statement. Only free leases: an
                    // expired one may belong to a sibling that still runs, which only
                    // the crawl worker knows.
                    auto step = store->seal_and_claim_next(*self.parent_id, ttl, supervisor.take_held_exits(), hooks,
                                                           snapshot->host_limited);
                    log::info("snapshot sealed", {{"outcome", step.outcome}});
                    next = std::move(step.next);
                    if (next) {
                        next_results = std::move(step.next_results);
                    }
                } else {
                    log::info("snapshot sealed", {{"outcome", store->seal(supervisor.take_held_exits())}});
                }
            }
            if (!options.continue_with_crawl || taken >= max_snapshots) {
                break;
            }
            if (stop.count() > 0) {
                code = ExitCode::interrupted; // between snapshots: nothing held, nothing to give back
                break;
            }
            if (!lease) {
                // Started on a snapshot that was sealed already: claim the first one here.
                ClaimScope free_only;
                free_only.take_expired = false;
                free_only.host_limited = snapshot->host_limited;
                auto claims = claim_due_snapshots(conn, crawl_id, *self.parent_id, {self.id}, ttl, free_only);
                if (!claims.empty()) {
                    next = claims.front();
                }
            }
            if (!next) {
                break;
            }
            // The claim returned what differs between snapshots of one crawl (and
            // pointed our row at it); the crawl's settings are those read at start.
            const auto& claim = *next;
            log::set_context("snapshot", claim.snapshot_id);
            snapshot->id = claim.snapshot_id;
            snapshot->url = claim.url;
            snapshot->depth = claim.depth;
            snapshot->status = "started";
            store = std::make_unique<SnapshotStore>(conn, claim.snapshot_id, crawl_id);
            lease = Lease::granted(LeaseTable::snapshot, claim.snapshot_id, self.id, ttl, claim.attempts);
        }
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
