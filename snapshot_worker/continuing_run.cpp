#include "snapshot_worker/continuing_run.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/base/write_behind.hpp"

#include <algorithm>
#include <utility>

namespace orch {

std::vector<Hook> planned_hooks(const WorkerScope& scope)
{
    std::vector<Hook> hooks;
    for (const auto& h : scope.hooks) {
        hooks.push_back(h.hook);
    }
    return hooks;
}

namespace {

// The hooks of `scope` a snapshot with these results still runs.
std::vector<PlannedHook> todo_for(const WorkerScope& scope, const std::map<std::string, ResultState>& results)
{
    std::vector<PlannedHook> todo;
    for (const auto& h : scope.hooks) {
        const auto& state = results.at(h.hook.id());
        // A rerun after a crash never repeats what already finished well.
        if (state.status == "succeeded" || state.status == "skipped" || state.status == "noresults") {
            continue;
        }
        todo.push_back(PlannedHook{h.hook, h.config, h.env, state.id});
    }
    return todo;
}

SnapshotRun::Context context_for(const WorkerScope& scope, const SnapshotRecord& snapshot)
{
    SnapshotRun::Context ctx;
    ctx.snapshot = snapshot;
    ctx.snap_dir = scope.data_dir / "snapshots" / snapshot.id;
    ctx.parallelism = scope.parallelism;
    ctx.teardown_grace = scope.teardown_grace;
    return ctx;
}

// Runs the hooks of one leased snapshot; the caller seals it when this returns
// ok. Anything else gives it back for a later run (interrupted). Throws
// LeaseLost when the lease is gone. `prepared`: its results, when the claim
// that leased it made them already (seal_and_claim_next); else they are made
// here. `batch`: the rows reserved for it and the held seals of the snapshots
// before it (snapshot_batch.hpp), written while it runs when they fall due.
ExitCode run_leased(pqxx::connection& conn, Supervisor& supervisor, StopSignals& stop, const WorkerScope& scope,
                    SnapshotStore& store, const SnapshotRecord& snapshot, Lease& lease,
                    std::optional<std::map<std::string, ResultState>> prepared, SnapshotBatch& batch,
                    std::map<std::string, LaunchRequest> reserved)
{
    auto results = prepared ? std::move(*prepared) : store.ensure_results(planned_hooks(scope));
    const auto todo = todo_for(scope, results);
    auto ctx = context_for(scope, snapshot);
    ctx.reserved = std::move(reserved);
    ctx.side_work_due = [&batch] { return batch.seal_due(); };
    ctx.side_work = [&batch] { batch.seal_held(); };
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

// The launch requests of a claimed snapshot's hooks, for SnapshotBatch::take
// to reserve: what SnapshotRun would build for them when they start (a hook
// whose request cannot be built is left to its run, which records it failed).
std::vector<LaunchRequest> requests_of(const WorkerScope& scope, const SnapshotRecord& crawl_snapshot,
                                       const SnapshotBatch::Claimed& claimed)
{
    auto record = crawl_snapshot;
    record.id = claimed.claim.snapshot_id;
    record.url = claimed.claim.url;
    record.depth = claimed.claim.depth;
    record.status = "started";
    const auto ctx = context_for(scope, record);
    std::vector<LaunchRequest> out;
    for (const auto& planned : todo_for(scope, claimed.results)) {
        if (!planned.hook.problem.empty()) {
            continue;
        }
        try {
            out.push_back(launch_request_for(record, ctx.snap_dir, planned, planned.hook.background));
        } catch (const std::exception&) {
        }
    }
    return out;
}

} // namespace

ExitCode run_continuing(pqxx::connection& conn, Supervisor& supervisor, StopSignals& stop, const WorkerScope& scope,
                        SnapshotBatch& batch, const SnapshotWorkerOptions& options, const SelfRow& self,
                        SnapshotRecord& snapshot, std::unique_ptr<SnapshotStore>& store, std::optional<Lease>& lease,
                        int& taken)
{
    const auto crawl_id = snapshot.crawl_id;
    const auto hooks = planned_hooks(scope);
    const auto requests = [&scope, &snapshot](const SnapshotBatch::Claimed& c) { return requests_of(scope, snapshot, c); };
    // The results and the reserved rows of the snapshot claimed last, as its claim made them.
    std::optional<std::map<std::string, ResultState>> next_results;
    std::map<std::string, LaunchRequest> next_reserved;
    ExitCode code = ExitCode::ok;
    for (;;) {
        if (lease) {
            store->set_owner(self.id);
            const auto started = SnapshotBatch::Clock::now();
            code = run_leased(conn, supervisor, stop, scope, *store, snapshot, *lease,
                              std::exchange(next_results, std::nullopt), batch, std::exchange(next_reserved, {}));
            // Quick: it could have shared a statement with the next one without
            // holding anything back longer than the write-behind window.
            const bool quick = SnapshotBatch::Clock::now() - started < k_write_behind_window;
            ++taken;
            if (code != ExitCode::ok) {
                break;
            }
            stop.take();
            const bool go_on = options.continue_with_crawl && taken < scope.max_snapshots && stop.count() == 0;
            if (!go_on) {
                batch.seal_held();
                log::info("snapshot sealed", {{"outcome", store->seal(supervisor.take_held_exits())}});
            } else if (batch.has_ahead()) {
                // Claimed already: its seal waits for the statement after the next
                // one, unless it took too long to wait at all, or it was attempted
                // before: a held snapshot is charged its neighbour's death, and one
                // retried already must not be charged for another's.
                if (quick && lease->attempts() == 1) {
                    batch.hold(std::move(store));
                } else {
                    batch.seal_held();
                    log::info("snapshot sealed", {{"outcome", store->seal(supervisor.take_held_exits())}});
                }
            } else if (!batch.held().empty() || (quick && scope.batch_size > 1)) {
                // The seals and the next batch's claim in one statement. Only free
                // leases: an expired one may belong to a sibling that still runs,
                // which only the crawl worker knows.
                const int claim = quick ? std::clamp(scope.batch_size, 1, scope.max_snapshots - taken) : 1;
                const auto held = batch.held();
                auto step = store->seal_batch_and_claim(held, *self.parent_id, scope.ttl, supervisor.take_held_exits(),
                                                        hooks, claim);
                log::info("snapshot sealed", {{"outcome", step.outcomes.at(0)}});
                for (std::size_t i = 0; i < held.size(); ++i) {
                    log::info("snapshot sealed", {{"snapshot", held[i]->snapshot_id()}, {"outcome", step.outcomes.at(i + 1)}});
                }
                batch.held_sealed();
                batch.take(std::move(step.next), requests);
            } else {
                // The seal and the next claim in one statement, one snapshot at a time.
                auto step = store->seal_and_claim_next(*self.parent_id, scope.ttl, supervisor.take_held_exits(), hooks,
                                                       snapshot.host_limited);
                log::info("snapshot sealed", {{"outcome", step.outcome}});
                if (step.next) {
                    batch.take({{std::move(*step.next), std::move(step.next_results)}}, requests);
                }
            }
        }
        if (!options.continue_with_crawl || taken >= scope.max_snapshots) {
            break;
        }
        if (stop.count() > 0) {
            code = ExitCode::interrupted; // between snapshots: what the batch holds is settled by the caller
            break;
        }
        std::optional<SnapshotBatch::Claimed> next;
        // When the next one's expiry was last set, or earlier: the claim that
        // leased it, or a renewal of the lease before it, which renewed its
        // siblings too. Its own renewals count from there, not from its start:
        // a batch member that starts late behind quick ones would otherwise
        // run past its expiry before its first renewal (and recovery would take
        // the worker for stalled).
        auto expiry_set = lease ? lease->renewed_at() : SnapshotBatch::Clock::now();
        if (batch.has_ahead()) {
            next = batch.pop();
        } else if (!lease) {
            // Started on a snapshot that was sealed already: claim the first one here.
            ClaimScope free_only;
            free_only.take_expired = false;
            free_only.host_limited = snapshot.host_limited;
            auto claims = claim_due_snapshots(conn, crawl_id, *self.parent_id, {self.id}, scope.ttl, free_only);
            if (!claims.empty()) {
                next = SnapshotBatch::Claimed{claims.front(), {}, {}};
            }
        }
        if (!next) {
            break;
        }
        // The claim returned what differs between snapshots of one crawl (and
        // pointed our row at it); the crawl's settings are those read at start.
        const auto& claim = next->claim;
        log::set_context("snapshot", claim.snapshot_id);
        snapshot.id = claim.snapshot_id;
        snapshot.url = claim.url;
        snapshot.depth = claim.depth;
        snapshot.status = "started";
        if (!next->results.empty()) {
            next_results = std::move(next->results);
        }
        next_reserved = std::move(next->reserved);
        store = std::make_unique<SnapshotStore>(conn, claim.snapshot_id, crawl_id);
        store->set_index_dir(context_for(scope, snapshot).snap_dir);
        lease = Lease::granted(LeaseTable::snapshot, claim.snapshot_id, self.id, scope.ttl, claim.attempts, expiry_set);
        if (scope.batch_size > 1) {
            // The batch's other leases are renewed with this one.
            lease->renew_siblings_in(crawl_id);
        }
    }
    return code;
}

} // namespace orch
