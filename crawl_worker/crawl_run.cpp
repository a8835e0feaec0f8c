#include "crawl_worker/crawl_run.hpp"

#include "common/env_map.hpp"
#include "common/errors.hpp"
#include "common/event_journal.hpp"
#include "common/hook_argv.hpp"
#include "common/hook_env.hpp"
#include "common/log.hpp"
#include "common/random_id.hpp"
#include "common/recovery.hpp"
#include "common/snapshot_claims.hpp"

#include <fmt/format.h>

#include <poll.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

// A worker's exit code says what happened to its snapshot (common/exit_codes.hpp).
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

} // namespace

CrawlRun::CrawlRun(Context ctx, Supervisor& supervisor, CrawlStore& store, Lease& lease, pqxx::connection& conn,
                   StopSignals& stop)
    : m_ctx(std::move(ctx)), m_supervisor(supervisor), m_store(store), m_lease(lease), m_conn(conn), m_stop(stop),
      m_cancel_listener(conn, "crawl_cancel")
{
}

Clock::time_point CrawlRun::crawl_deadline() const
{
    if (!m_ctx.crawl.timeout_s) {
        return Clock::time_point::max();
    }
    // The timeout counts from the crawl's first start, across resumed runs.
    auto total = std::chrono::duration<double>(*m_ctx.crawl.timeout_s - m_ctx.crawl.started_seconds_ago);
    return m_started + std::chrono::duration_cast<Clock::duration>(total);
}

ExitCode CrawlRun::run(const std::vector<CrawlHook>& crawl_hooks, const std::vector<CrawlHook>& end_hooks)
{
    try {
        check_limits();
        bool hooks_ok = m_stopping == Stop::none && run_hooks(crawl_hooks, "Crawl");
        if (m_stopping == Stop::none && !hooks_ok) {
            m_stopping = Stop::failed;
            m_stop_reason = "a required Crawl hook failed";
        }
        bool seeded = false;
        if (m_stopping == Stop::none) {
            seeded = true;
            int created = m_store.create_seed_snapshots(m_ctx.crawl.max_urls);
            log::info("crawl started", {{"urls", std::to_string(m_ctx.crawl.url_count)},
                                        {"seed_snapshots", std::to_string(created)},
                                        {"max_workers", std::to_string(m_ctx.max_workers)}});
        }
        // Paused, the crawl drains: no new snapshot workers, and the running ones
        // claim nothing more for a paused crawl, so each exits after its snapshot.
        // Nothing that ran is lost. A resume before the last one exits carries on.
        while (m_stopping == Stop::none || m_stopping == Stop::paused) {
            if (m_stopping == Stop::none) {
                spawn_due_workers();
                if (m_workers.empty() && m_store.unsealed_count() == 0) {
                    break;
                }
            } else if (m_workers.empty()) {
                check_limits(); // a last look: resumed or cancelled meanwhile?
                if (m_stopping == Stop::none && !seeded) {
                    // Paused before its Crawl hooks finished: the next claim runs them again.
                    m_stopping = Stop::paused;
                }
                if (m_stopping == Stop::paused) {
                    break;
                }
                continue;
            }
            pump(Clock::now() + std::chrono::seconds(1));
        }
        if (m_stopping == Stop::signal || m_stopping == Stop::refused || m_stopping == Stop::paused) {
            stop_workers();
            m_supervisor.teardown(m_background, m_ctx.teardown_grace);
            m_lease.release(m_conn);
            static const std::map<Stop, std::pair<std::string, std::string>> k_releases = {
                {Stop::signal, {"signal", "stop requested (signal)"}},
                {Stop::refused, {"configuration refused", m_stop_reason}},
                {Stop::paused, {"paused", "paused; its running snapshots finished"}}};
            const auto& [why, message] = k_releases.at(m_stopping);
            Event released{"crawl.released", "crawl released: " + message, m_ctx.crawl.id};
            released.process_id = m_ctx.self_row_id;
            released.detail = {{"reason", why}};
            record_event(m_conn, "crawl_worker", released);
            if (m_stopping == Stop::refused) {
                log::error("crawl released for a later run: " + m_stop_reason);
                return ExitCode::config;
            }
            log::warn("crawl released for a later run (" + message + ")");
            return ExitCode::interrupted;
        }
        std::optional<std::string> forced;
        std::optional<std::string> reason;
        if (m_stopping != Stop::none) {
            stop_workers();
            static const std::map<Stop, std::string> k_outcomes = {
                {Stop::cancelled, "cancelled"}, {Stop::timed_out, "timed_out"}, {Stop::failed, "failed"}};
            forced = k_outcomes.at(m_stopping);
            reason = m_stop_reason;
            int sealed = m_store.seal_unsealed(*forced, m_stop_reason);
            log::warn("crawl stopped early", {{"outcome", *forced}, {"reason", m_stop_reason},
                                              {"snapshots_sealed", std::to_string(sealed)}});
        }
        // CrawlEnd runs whatever stopped the crawl: from here on only a signal stops hooks.
        m_finishing = true;
        m_stopping = Stop::none;
        run_hooks(end_hooks, "CrawlEnd");
        if (!m_background.empty()) {
            m_supervisor.teardown(m_background, m_ctx.teardown_grace);
            m_background.clear();
        }
        // The crawl's seal is the durable point: every hook row is closed before it.
        m_supervisor.write_held_exits();
        auto outcome = m_store.seal(forced, reason);
        log::info("crawl sealed", {{"outcome", outcome}});
        return ExitCode::ok;
    } catch (const LeaseLost& e) {
        log::warn(e.what());
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
        throw;
    }
}

std::string CrawlRun::launch_hook(const CrawlHook& h, bool background)
{
    auto dir = m_ctx.crawl_dir / h.hook.plugin;
    std::filesystem::create_directories(dir);
    HookContext hc{m_ctx.data_dir, m_ctx.crawl_dir, std::nullopt};
    LaunchRequest req;
    req.argv = build_hook_argv(h.hook, HookArguments{m_ctx.crawl.first_url, std::nullopt, m_ctx.crawl.id});
    req.env = build_hook_env(h.config, hc, inherited_environment());
    req.pwd = dir;
    req.log_dir = dir;
    req.name = h.hook.file_name;
    // A background crawl hook (the shared browser) lives as long as the crawl.
    if (!background) {
        req.timeout_s = std::chrono::duration<double>(h.config.timeout).count();
    }
    req.plugin = h.hook.plugin;
    req.hook_name = h.hook.id();
    req.crawl_id = m_ctx.crawl.id;
    if (!h.hook.problem.empty()) {
        log::warn("crawl hook cannot run", {{"hook", h.hook.id()}, {"problem", h.hook.problem}});
        return {};
    }
    auto result = m_supervisor.launch(req);
    if (!result.started()) {
        log::warn("crawl hook did not start", {{"hook", h.hook.id()}, {"error", result.failure->message}});
        return {};
    }
    return result.row_id;
}

bool CrawlRun::run_hooks(const std::vector<CrawlHook>& hooks, const char* event)
{
    bool ok = true;
    for (const auto& h : hooks) {
        if (m_stopping != Stop::none) {
            break;
        }
        bool background = h.hook.background;
        auto row = launch_hook(h, background);
        if (row.empty()) {
            ok = ok && !h.config.required;
            continue;
        }
        if (background) {
            m_background.push_back(row);
            continue;
        }
        auto deadline = Clock::now() + h.config.timeout;
        // A stop (signal, and for Crawl hooks also cancel or crawl timeout) ends the hook early.
        while (m_hook_exits.count(row) == 0 && m_stopping == Stop::none) {
            if (Clock::now() >= deadline) {
                m_hook_exits[row] = m_supervisor.wait(row, std::chrono::milliseconds(0), m_ctx.teardown_grace);
                m_hook_exits[row].timed_out = true;
                break;
            }
            pump(deadline);
        }
        if (m_hook_exits.count(row) == 0) {
            m_hook_exits[row] = m_supervisor.teardown({row}, m_ctx.teardown_grace).at(0);
        }
        const auto& o = m_hook_exits[row];
        bool succeeded = !o.timed_out && o.exit_code && *o.exit_code == 0;
        log::info("crawl hook finished", {{"event", event}, {"hook", h.hook.id()}, {"process", row},
                                          {"exit_code", o.exit_code ? std::to_string(*o.exit_code) : ""},
                                          {"timed_out", o.timed_out ? "yes" : "no"}});
        if (!succeeded && h.config.required) {
            ok = false;
        }
    }
    return ok;
}

void CrawlRun::spawn_due_workers()
{
    if (m_workers.size() >= m_ctx.max_workers || m_stopping != Stop::none) {
        return;
    }
    // Our running workers keep their snapshots even when a lease expired (a stopped or
    // hung worker is the recovery pass's to judge), so a snapshot never runs twice at once.
    ClaimScope scope;
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
        req.crawl_id = m_ctx.crawl.id;
        req.snapshot_id = claim.snapshot_id;
        auto result = m_supervisor.launch(req);
        if (!result.started()) {
            // Nothing runs the claims not started yet: give them back before failing.
            for (std::size_t j = i; j < claims.size(); ++j) {
                return_unstarted_claim(m_conn, claims[j]);
            }
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
    if (!outcome.term_signal && outcome.exit_code == to_int(ExitCode::config)) {
        // It refused before running anything (snapshot_worker reads its whole
        // configuration first). Every other worker would refuse too, and the
        // snapshots are not at fault: none of them may spend an attempt on it.
        auto reason = fmt::format("a snapshot worker refused its configuration (exit 3); see orchestrator logs {} "
                                  "--stderr",
                                  outcome.row_id);
        m_store.give_back_refused(m_store.held_by(outcome.row_id).value_or(first_snapshot), outcome.row_id, reason);
        if (m_stopping == Stop::none || m_stopping == Stop::signal || m_stopping == Stop::paused) {
            m_stopping = Stop::refused;
            m_stop_reason = reason;
        }
        return;
    }
    // The worker may have moved on from the snapshot it was started with: the one it
    // died on is the one leased to its row (none if it died between two).
    auto snapshot_id = m_store.held_by(outcome.row_id).value_or(first_snapshot);
    auto reason = describe(outcome);
    log::warn("snapshot worker died", {{"snapshot", snapshot_id}, {"process", outcome.row_id}, {"reason", reason}});
    // Its hooks are orphans now: tear them down before the snapshot runs again.
    int killed = recover_orphans();
    int deaths = ++m_deaths[snapshot_id];
    bool sealed = m_store.retry_or_fail(snapshot_id, outcome.row_id, deaths, m_ctx.max_attempts,
                                        std::chrono::seconds(1), reason);
    log::info(sealed ? "snapshot sealed as failed" : "snapshot will be retried",
              {{"snapshot", snapshot_id}, {"orphans_killed", std::to_string(killed)}});
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

void CrawlRun::pump(Clock::time_point until)
{
    // Once stopping (or running CrawlEnd hooks) the crawl deadline no longer wakes us:
    // a deadline in the past would make this a busy loop.
    bool limits_apply = m_stopping == Stop::none && !m_finishing;
    auto deadline = limits_apply ? crawl_deadline() : Clock::time_point::max();
    auto wake = std::min({until, m_lease.next_renewal(), deadline, m_next_check});
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    pollfd fds[3] = {{m_supervisor.epoll_fd(), POLLIN, 0}, {m_stop.fd(), POLLIN, 0}, {m_cancel_listener.fd(), POLLIN, 0}};
    int rc = ::poll(fds, 3, static_cast<int>(std::clamp<long long>(ms + 1, 0, 60'000)));
    if (rc < 0 && errno != EINTR) {
        throw_errno("poll");
    }
    if (m_stop.take() > 0 && m_stopping != Stop::signal && m_stopping != Stop::refused) {
        log::warn("stop requested: no new snapshot workers; stopping the running ones");
        m_stopping = Stop::signal;
    }
    m_supervisor.process_events();
    for (const auto& outcome : m_supervisor.take_finished()) {
        on_worker_exit(outcome);
    }
    bool cancel_hint = false;
    for (const auto& payload : m_cancel_listener.drain()) {
        cancel_hint = cancel_hint || payload == m_ctx.crawl.id;
    }
    if (cancel_hint || Clock::now() >= m_next_check) {
        check_limits();
    }
    if (m_lease.renewal_due() && !m_lease.renew(m_conn)) {
        throw LeaseLost(fmt::format("lost the lease on crawl {}", m_ctx.crawl.id));
    }
}

void CrawlRun::check_limits()
{
    // Cancellation is polled too, once a second: NOTIFY is a hint, not a guarantee.
    m_next_check = Clock::now() + std::chrono::seconds(1);
    if ((m_stopping != Stop::none && m_stopping != Stop::paused) || m_finishing) {
        return;
    }
    const auto control = m_store.control();
    if (control.cancel_requested) {
        m_stopping = Stop::cancelled;
        m_stop_reason = "cancelled";
    } else if (control.paused) {
        if (m_stopping != Stop::paused) {
            log::info("crawl paused: letting the running snapshots finish", {{"workers", std::to_string(m_workers.size())}});
        }
        m_stopping = Stop::paused;
    } else if (m_stopping == Stop::paused) {
        log::info("crawl resumed before it was released");
        m_stopping = Stop::none;
    } else if (Clock::now() >= crawl_deadline()) {
        m_stopping = Stop::timed_out;
        m_stop_reason = fmt::format("crawl timed out after {} s", m_ctx.crawl.timeout_s.value_or(0));
    }
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

} // namespace orch
