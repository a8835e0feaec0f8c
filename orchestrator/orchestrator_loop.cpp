#include "orchestrator/orchestrator_loop.hpp"

#include "common/db/database_outage.hpp"
#include "common/base/env_map.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/config/lean_exec.hpp"
#include "common/work/lease.hpp"
#include "common/base/log.hpp"
#include "common/config/sd_notify.hpp"
#include "common/recorder/self_registration.hpp"
#include "orchestrator/schedules.hpp"
#include "orchestrator/work_queue.hpp"

#include <fmt/format.h>

#include <poll.h>

#include <algorithm>

namespace orch {

OrchestratorLoop::OrchestratorLoop(Database& db, const MachineIdentity& machine, std::filesystem::path data_dir,
                                   const CommonOptions& common, const RunOptions& options, StopSignals& stop,
                                   std::chrono::seconds lease_ttl, std::uint64_t max_log_bytes)
    : m_db(db), m_conn(db.conn()), m_machine(machine), m_data_dir(std::move(data_dir)), m_common(common),
      m_options(options), m_stop(stop), m_lease_ttl(lease_ttl), m_max_log_bytes(max_log_bytes)
{
    m_containment.scope = containment_scope(m_data_dir.string());
}

ExitCode OrchestratorLoop::run(const std::string& self_id)
{
    m_self_id = self_id;
    SupervisorOptions sup;
    sup.machine_id = m_machine.id;
    sup.self_row_id = self_id;
    sup.self_process_type = "orchestrator";
    sup.containment = m_containment;
    sup.max_log_bytes = m_max_log_bytes;
    // A second SIGTERM while crawl workers wind down kills them at once.
    sup.stop_signals = &m_stop;
    Supervisor supervisor(m_conn, sup);
    m_supervisor = &supervisor;
    // systemd's watchdog stays fed while a database outage is waited out.
    const auto outer_policy = outage_policy();
    auto policy = outer_policy;
    policy.while_waiting = [this] { m_watchdog.feed(); };
    set_outage_policy(policy);
    struct RestorePolicy {
        const OutagePolicy& policy;
        ~RestorePolicy() { set_outage_policy(policy); }
    } restore{outer_policy};
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
        // Claims first: a wake-up is nearly always an added crawl, and the schedule
        // check is a round trip on its way. A crawl a schedule enqueues here wakes
        // this loop again (its insert notifies our own listener) and is claimed then.
        if (!m_config_error) {
            spawn_workers();
        }
        enqueue_due_schedules(m_conn);
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
    if (!m_options.daemon && m_stop.count() > 0) {
        // A one-shot run's job is to run until nothing is due: stopped before that,
        // its crawls were released unfinished, and a script must not read success.
        // A daemon's job is to run until stopped: systemd's SIGTERM ends it with 0.
        return ExitCode::interrupted;
    }
    if (!m_options.daemon && !m_failures.empty()) {
        // Nothing is due within the idle window, but a crawl whose worker failed
        // waits out its backoff: the run did not do its job, and a script that
        // runs it must not read success while that crawl stays unfinished.
        std::vector<std::string> failed;
        for (const auto& [crawl, failures] : m_failures) {
            failed.push_back(crawl);
        }
        auto left = unfinished_crawls(m_conn, failed);
        if (!left.empty()) {
            std::string list;
            for (const auto& crawl : left) {
                list += fmt::format("{}crawl {} (its crawl worker failed {} time(s); due again at {})",
                                    list.empty() ? "" : ", ", crawl.crawl_id, m_failures[crawl.crawl_id],
                                    crawl.retry_at);
            }
            throw Error(ExitCode::internal_error,
                        fmt::format("{} crawl(s) left unfinished: {}; the next run or a daemon retries them, and "
                                    "`orchestrator show crawl` with the id says why the worker failed",
                                    left.size(), list));
        }
    }
    return ExitCode::ok;
}

void OrchestratorLoop::wait(NotificationListener& listener, Clock::time_point until)
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

void OrchestratorLoop::spawn_workers()
{
    auto room = static_cast<std::size_t>(m_options.max_crawl_workers) - std::min(m_workers.size(),
                                                                                static_cast<std::size_t>(m_options.max_crawl_workers));
    if (room == 0) {
        return;
    }
    std::vector<std::string> live;
    for (const auto& [row, crawl] : m_workers) {
        live.push_back(row);
    }
    for (const auto& claim : claim_due_crawls(m_conn, room, m_lease_ttl, live)) {
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
        req.labels.crawl_id = claim.crawl_id;
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

void OrchestratorLoop::on_worker_exit(const ProcessOutcome& outcome)
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
    const auto backoff = failure_backoff(failures);
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

// systemd's watchdog is fed once per loop turn (a hung loop gets the service
// restarted), and its STATUS= line says how many crawl workers run.
void OrchestratorLoop::report_status()
{
    m_watchdog.feed();
    if (m_workers.size() != m_reported_workers) {
        m_reported_workers = m_workers.size();
        sd_notify(fmt::format("STATUS={} crawl worker(s) running", m_reported_workers));
    }
}

void OrchestratorLoop::shutdown()
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

} // namespace orch
