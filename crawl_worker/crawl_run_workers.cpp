#include "crawl_worker/crawl_run.hpp"

#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/log.hpp"
#include "common/base/random_id.hpp"
#include "common/recorder/recovery.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <csignal>

// CrawlRun and its snapshot workers: started on batched claims, their exits
// judged, the hooks of those that died torn down, stopped at the end.
namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

// A worker's exit code says what happened to its snapshot (common/base/exit_codes.hpp).
bool worker_left_snapshot_consistent(const ProcessOutcome& o)
{
    if (!o.exit_code || o.term_signal) {
        return false;
    }
    switch (static_cast<ExitCode>(*o.exit_code)) {
    case ExitCode::ok:
    case ExitCode::lease_lost:
    case ExitCode::interrupted:
    case ExitCode::not_found:
        return true;
    default:
        return false;
    }
}

// Killed by the default action of a stop signal: snapshot_worker blocks those
// (StopSignals) before it reads its snapshot, and keeps them blocked until it
// exits, so it died before it started. A stop of the workers (SIGTERM, the
// crawl being stopped, paused or refused) meets workers still starting on a
// busy machine: their snapshots are not at fault and spend no attempt.
bool stopped_before_start(const ProcessOutcome& o)
{
    return o.term_signal && (*o.term_signal == SIGTERM || *o.term_signal == SIGINT || *o.term_signal == SIGHUP);
}

std::string describe(const ProcessOutcome& o)
{
    if (o.term_signal) {
        return fmt::format("snapshot worker killed by signal {}", *o.term_signal);
    }
    if (o.exit_code) {
        return fmt::format("snapshot worker exited with code {}", *o.exit_code);
    }
    return fmt::format("snapshot worker ended ({})", o.end_reason);
}

// Nothing runs claims[from..]: gives them back (due now, their attempts undone)
// before the caller fails. Best effort: the launch's own failure is what the caller
// reports, so a give-back that fails (the database gone) is only logged, and the
// claims left are freed when their leases expire.
void give_back_unstarted(pqxx::connection& conn, const std::vector<ClaimedSnapshot>& claims, std::size_t from)
{
    for (std::size_t j = from; j < claims.size(); ++j) {
        try {
            work_states::return_unstarted_claim(conn, claims[j].snapshot_id, claims[j].owner);
        } catch (const std::exception& e) {
            log::warn("cannot give back unstarted snapshot claims; their leases will expire",
                      {{"snapshot", claims[j].snapshot_id}, {"left", std::to_string(claims.size() - j)},
                       {"error", e.what()}});
            return;
        }
    }
}

} // namespace

std::chrono::milliseconds CrawlRun::claim_interval() const
{
    constexpr std::chrono::milliseconds k_default{1000};
    if (!m_ctx.crawl.host_delay_s) {
        return k_default;
    }
    const auto quarter = std::chrono::milliseconds(static_cast<long long>(*m_ctx.crawl.host_delay_s * 250));
    return std::clamp(quarter, std::chrono::milliseconds(50), k_default);
}

void CrawlRun::spawn_due_workers()
{
    if (m_workers.size() >= m_ctx.max_workers || m_stopping != Stop::none) {
        return;
    }
    // Our running workers keep their snapshots even when a lease expired (a stopped or
    // hung worker is the recovery pass's to judge), so a snapshot never runs twice at once.
    ClaimScope scope;
    scope.host_limited = m_ctx.crawl.host_limited;
    for (const auto& [row, snap] : m_workers) {
        scope.live_owners.push_back(row);
    }
    // The workers' process row ids exist before the workers: each due snapshot is
    // leased to its worker's row in one batched claim, and the worker adopts it.
    std::vector<std::string> owners;
    for (std::size_t i = m_workers.size(); i < m_ctx.max_workers; ++i) {
        owners.push_back(random_uuid());
    }
    // Before the claim is sent: the leases it grants expire no earlier than this plus their TTL.
    const auto claimed_at = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch());
    auto claims = claim_due_snapshots(m_conn, m_ctx.crawl.id, m_lease.owner(), owners, m_lease.ttl(), scope);
    for (std::size_t i = 0; i < claims.size(); ++i) {
        const auto& claim = claims[i];
        LaunchRequest req;
        req.row_id = claim.owner;
        // --continue: the worker then takes the crawl's next due snapshots itself, so
        // a process start and a database connection are paid per worker, not per snapshot.
        // --lease-claimed-at: the worker takes up the lease as granted instead of
        // confirming it in a round trip (its first write is fenced on it anyway).
        req.argv = {m_ctx.snapshot_worker_exe,
                    "--snapshot-id",
                    claim.snapshot_id,
                    "--continue",
                    "--lease-claimed-at",
                    std::to_string(claimed_at.count()),
                    "--attempt",
                    std::to_string(claim.attempts)};
        req.argv.insert(req.argv.end(), m_ctx.worker_args.begin(), m_ctx.worker_args.end());
        req.env = m_ctx.worker_env;
        req.private_env = m_ctx.worker_private_env;
        req.pwd = m_ctx.data_dir;
        req.log_dir = m_ctx.crawl_dir / "snapshot_workers";
        req.name = "snapshot_worker";
        req.process_type = "worker";
        req.labels.crawl_id = m_ctx.crawl.id;
        req.labels.snapshot_id = claim.snapshot_id;
        // Its exit rides on the next worker's insert, or on the crawl's seal: on the
        // path from the last snapshot's seal to the crawl's, a round trip fewer.
        req.hold_exit = true;
        LaunchResult result;
        try {
            result = m_supervisor.launch(req);
        } catch (...) {
            // A launch that throws (its log directory, a database error) started no
            // worker either: without this its claims would stay leased to rows that
            // never run until their leases expire.
            give_back_unstarted(m_conn, claims, i);
            throw;
        }
        if (!result.started()) {
            give_back_unstarted(m_conn, claims, i);
            throw Error(ExitCode::internal_error,
                        fmt::format("cannot start snapshot_worker: {}", result.failure->message));
        }
        m_workers[result.row_id] = claim.snapshot_id;
        log::debug("snapshot worker started", {{"snapshot", claim.snapshot_id}, {"process", result.row_id}});
    }
}

void CrawlRun::on_worker_exit(const ProcessOutcome& outcome)
{
    auto it = m_workers.find(outcome.row_id);
    if (it == m_workers.end()) {
        m_hook_exits[outcome.row_id] = outcome;
        return;
    }
    auto first_snapshot = it->second;
    m_workers.erase(it);
    if (worker_left_snapshot_consistent(outcome)) {
        return;
    }
    // A worker that died is judged from the rows (recovery takes a running row
    // with a dead process for an orphan's): its own exit is written first.
    m_supervisor.write_held_exits();
    // What it held: the snapshot it was started for, or those it claimed since.
    auto held = m_store.held_by(outcome.row_id);
    if (held.empty()) {
        held.push_back(first_snapshot);
    }
    if (stopped_before_start(outcome)) {
        auto reason = fmt::format("snapshot worker stopped by signal {} before it started", *outcome.term_signal);
        log::info("snapshot worker stopped before it started; its snapshot spends no attempt",
                  {{"snapshot", first_snapshot}, {"process", outcome.row_id}});
        for (const auto& snapshot_id : held) {
            m_store.give_back_unspent(snapshot_id, outcome.row_id, reason);
        }
        return;
    }
    if (!outcome.term_signal && outcome.exit_code == to_int(ExitCode::config)) {
        // It refused before running anything (snapshot_worker reads its whole
        // configuration first). Every other worker would refuse too, and the
        // snapshots are not at fault: none of them may spend an attempt on it.
        auto reason = fmt::format("a snapshot worker refused its configuration (exit 3); see orchestrator logs {} "
                                  "--stderr",
                                  outcome.row_id);
        for (const auto& snapshot_id : held) {
            m_store.give_back_unspent(snapshot_id, outcome.row_id, reason);
        }
        if (m_stopping == Stop::none || m_stopping == Stop::signal || m_stopping == Stop::paused) {
            m_stopping = Stop::refused;
            m_stop_reason = reason;
        }
        return;
    }
    // The worker may have moved on from the snapshot it was started with: the one it
    // died on is leased to its row (none if it died between two). A worker that
    // took a batch held several: each is charged the death, since which one it
    // died on is not recorded (snapshot_batch.hpp). That costs the others one
    // attempt, once: a snapshot attempted before is never claimed behind another
    // in a batch, nor has its seal held, so the next death is the culprit's alone.
    auto reason = describe(outcome);
    log::warn("snapshot worker died", {{"snapshot", held.front()}, {"process", outcome.row_id}, {"reason", reason},
                                       {"held", std::to_string(held.size())}});
    // Its hooks are orphans now: tear them down before the snapshot runs again.
    int killed = recover_orphans();
    for (const auto& snapshot_id : held) {
        int deaths = ++m_deaths[snapshot_id];
        bool sealed = m_store.retry_or_fail(snapshot_id, outcome.row_id, deaths, m_ctx.max_attempts,
                                            std::chrono::seconds(1), reason);
        log::info(sealed ? "snapshot sealed as failed" : "snapshot will be retried",
                  {{"snapshot", snapshot_id}, {"orphans_killed", std::to_string(killed)}});
    }
}

int CrawlRun::recover_orphans()
{
    RecoveryOptions ro;
    ro.containment = m_ctx.containment;
    ro.self_row_id = m_ctx.self_row_id;
    ro.grace = std::chrono::milliseconds(500);
    auto report = cleanup_stale_running(m_conn, m_ctx.machine_id, ro);
    m_supervisor.process_events();
    if (report.killed_on_recovery + report.lost > 0) {
        Event e{"recovery.cleaned",
                fmt::format("a snapshot worker died: killed {} orphaned trees, closed {} stale rows",
                            report.killed_on_recovery, report.lost),
                m_ctx.crawl.id};
        e.process_id = m_ctx.self_row_id;
        e.detail = {{"trees_killed", report.killed_on_recovery}, {"rows_lost", report.lost}};
        record_event(m_conn, "crawl_worker", e);
    }
    return report.killed_on_recovery;
}

void CrawlRun::stop_workers()
{
    if (m_workers.empty()) {
        return;
    }
    std::vector<std::string> rows;
    for (const auto& [row, snap] : m_workers) {
        rows.push_back(row);
    }
    log::info("stopping snapshot workers", {{"count", std::to_string(rows.size())}});
    // SIGTERM to each worker; it tears down its own hooks and releases its snapshot.
    for (const auto& outcome : m_supervisor.teardown(rows, m_ctx.worker_stop_grace)) {
        on_worker_exit(outcome);
    }
    m_workers.clear();
}

void CrawlRun::abandon_workers()
{
    // Nothing more is written for the crawl, but our snapshot workers get the same
    // graceful stop as on SIGTERM: killed after the short hook grace, they would
    // leave their hooks running and their results half-written.
    std::vector<std::string> rows;
    for (const auto& [row, snap] : m_workers) {
        rows.push_back(row);
    }
    m_workers.clear();
    bool orphans = false;
    for (const auto& outcome : m_supervisor.teardown(rows, m_ctx.worker_stop_grace)) {
        orphans = orphans || !worker_left_snapshot_consistent(outcome);
    }
    m_supervisor.teardown({}, m_ctx.teardown_grace);
    if (orphans) {
        recover_orphans();
    }
}

} // namespace orch
