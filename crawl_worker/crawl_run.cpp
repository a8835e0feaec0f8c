#include "crawl_worker/crawl_run.hpp"

#include "common/base/env_map.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/hooks/hook_launch_request.hpp"
#include "common/hooks/hook_env.hpp"
#include "common/base/log.hpp"
#include "crawl_worker/crawl_index.hpp"

#include <fmt/format.h>

#include <poll.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

} // namespace

CrawlRun::CrawlRun(Context ctx, Supervisor& supervisor, CrawlStore& store, Lease& lease, pqxx::connection& conn,
                   StopSignals& stop)
    : m_ctx(std::move(ctx)), m_supervisor(supervisor), m_store(store), m_lease(lease), m_conn(conn), m_stop(stop),
      m_cancel_listener(conn, "crawl_cancel")
{
    // A lost lease is not acted on here: the run's own check sees renew() fail again.
    m_supervisor.set_while_blocked([this] {
        if (m_lease.renewal_due()) {
            m_lease.renew(m_conn);
        }
    });
}

CrawlRun::~CrawlRun()
{
    m_supervisor.set_while_blocked({});
}

Clock::time_point CrawlRun::crawl_deadline() const
{
    if (!m_ctx.crawl.timeout_s) {
        return Clock::time_point::max();
    }
    // The timeout counts the crawl's running time since its first start, across
    // resumed runs; time paused does not count.
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
                // Counted before claiming: once the last worker is gone with
                // nothing left unsealed, the crawl seals without a claim first.
                if (m_workers.empty() && m_store.unsealed_count() == 0) {
                    break;
                }
                spawn_due_workers();
                if (!m_seal_prepared && !m_workers.empty()) {
                    // While the first workers run: the seal, after the last one, is then
                    // not parsed on the way from that worker's exit to the sealed crawl.
                    m_store.prepare_seal();
                    m_seal_prepared = true;
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
            pump(Clock::now() + claim_interval());
        }
        if (m_stopping == Stop::signal || m_stopping == Stop::refused || m_stopping == Stop::paused) {
            stop_workers();
            m_supervisor.teardown(m_background, m_ctx.teardown_grace);
            // A refused configuration will be refused again: not due at once.
            m_lease.release(m_conn, m_stopping == Stop::refused ? failure_backoff(m_lease.attempts())
                                                                : std::chrono::seconds(0));
            const std::map<Stop, std::pair<std::string, std::string>> releases = {
                {Stop::signal, {"signal", "stop requested (signal)"}},
                {Stop::refused, {"configuration refused", m_stop_reason}},
                {Stop::paused, {"paused", "paused; its running snapshots finished"}}};
            const auto& [why, message] = releases.at(m_stopping);
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
        // The crawl's seal is the durable point: it closes every process row still
        // held (the last snapshot worker's, the hooks'), in the same statement.
        auto outcome = m_store.seal(forced, reason, m_supervisor.take_held_exits());
        log::info("crawl sealed", {{"outcome", outcome}});
        write_snapshot_indexes_sealed_by(m_conn, m_ctx.crawl.id, m_ctx.self_row_id, m_ctx.data_dir);
        write_crawl_index(m_conn, m_ctx.crawl.id, m_ctx.crawl_dir);
        return ExitCode::ok;
    } catch (const LeaseLost& e) {
        log::warn(e.what());
        abandon_workers();
        throw;
    }
}

std::string CrawlRun::launch_hook(const CrawlHook& h, bool background)
{
    auto dir = m_ctx.crawl_dir / h.hook.plugin;
    std::filesystem::create_directories(dir);
    HookContext hc{m_ctx.data_dir, m_ctx.crawl_dir, std::nullopt};
    // A background crawl hook (the shared browser) lives as long as the crawl.
    auto req = hook_launch_request(h.hook, h.config, build_hook_env(h.config, hc, inherited_environment()),
                                   HookArguments{m_ctx.crawl.first_url, std::nullopt, m_ctx.crawl.id}, dir, background);
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
            if (m_supervisor.left_processes(row)) {
                // Exited, leaving processes behind: those are killed, the hook is done.
                m_hook_exits[row] = m_supervisor.wait(row, std::chrono::milliseconds(0), m_ctx.teardown_grace);
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
        // The resume added the pause to the crawl's paused time: the deadline moves with it.
        if (auto fresh = m_store.load()) {
            m_ctx.crawl.started_seconds_ago = fresh->started_seconds_ago;
            m_started = Clock::now();
        }
    } else if (Clock::now() >= crawl_deadline()) {
        m_stopping = Stop::timed_out;
        m_stop_reason = fmt::format("crawl timed out after {} s", m_ctx.crawl.timeout_s.value_or(0));
    }
}

} // namespace orch
