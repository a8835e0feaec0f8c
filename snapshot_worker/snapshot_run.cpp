#include "snapshot_worker/snapshot_run.hpp"

#include "common/base/errors.hpp"
#include "common/hooks/hook_output.hpp"
#include "common/hooks/hook_result.hpp"
#include "common/base/log.hpp"
#include "common/hooks/output_files.hpp"

#include <fmt/format.h>

#include <poll.h>

#include <utility>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds until(Clock::time_point t)
{
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
    return std::max(d, std::chrono::milliseconds(0));
}

std::filesystem::path stdout_log(const std::filesystem::path& dir, const std::string& name, const std::string& row)
{
    return dir / (name + "." + row + ".stdout.log");
}

} // namespace

SnapshotRun::SnapshotRun(Context context, Supervisor& supervisor, SnapshotStore& store, Lease& lease,
                         pqxx::connection& conn, StopSignals& stop, const UrlFilter& filter)
    : m_ctx(std::move(context)), m_supervisor(supervisor), m_store(store), m_lease(lease), m_conn(conn), m_stop(stop),
      m_filter(filter)
{
    // A lost lease is not acted on here: the run's own check sees renew() fail again.
    m_supervisor.set_while_blocked([this] {
        if (m_lease.renewal_due()) {
            m_lease.renew(m_conn);
        }
    });
}

SnapshotRun::~SnapshotRun()
{
    m_supervisor.set_while_blocked({});
}

std::filesystem::path SnapshotRun::hook_dir(const PlannedHook& planned) const
{
    return m_ctx.snap_dir / planned.hook.plugin;
}

std::size_t SnapshotRun::running_foreground() const
{
    return static_cast<std::size_t>(
        std::count_if(m_running.begin(), m_running.end(), [](const auto& kv) { return !kv.second.background; }));
}

void SnapshotRun::reserve_rows(const std::vector<PlannedHook>& hooks)
{
    if (!m_ctx.reserved.empty()) {
        for (const auto& hook : hooks) {
            if (auto it = m_ctx.reserved.find(hook.hook.id()); it != m_ctx.reserved.end()) {
                m_reserved[&hook] = std::move(it->second);
                m_ctx.reserved.erase(it);
            }
        }
        // Reserved for a hook that is not to run after all: closed.
        std::vector<std::string> unused;
        for (const auto& [hook_id, request] : std::exchange(m_ctx.reserved, {})) {
            unused.push_back(request.row_id);
        }
        m_supervisor.release_reservations(unused);
        return;
    }
    std::vector<const PlannedHook*> planned;
    std::vector<LaunchRequest> requests;
    for (const auto& hook : hooks) {
        if (!hook.hook.problem.empty()) {
            continue;
        }
        try {
            requests.push_back(launch_request(hook, hook.hook.background));
            planned.push_back(&hook);
        } catch (const std::exception&) {
            // launch() meets the same error and records the hook as failed.
        }
    }
    m_supervisor.reserve(requests);
    for (std::size_t i = 0; i < planned.size(); ++i) {
        m_reserved[planned[i]] = std::move(requests[i]);
    }
}

ExitCode SnapshotRun::run(const std::vector<PlannedHook>& hooks)
{
    try {
        reserve_rows(hooks);
        std::size_t i = 0;
        while (i < hooks.size() && !m_stopping) {
            // One step: every hook with the same step number.
            int step = hooks[i].hook.step;
            std::vector<const PlannedHook*> queue;
            for (; i < hooks.size() && hooks[i].hook.step == step; ++i) {
                queue.push_back(&hooks[i]);
            }
            std::size_t next = 0;
            while (!m_stopping && (next < queue.size() || running_foreground() > 0)) {
                while (!m_stopping && next < queue.size() &&
                       (queue[next]->hook.background || running_foreground() < m_ctx.parallelism)) {
                    launch(*queue[next], queue[next]->hook.background);
                    ++next;
                }
                if (running_foreground() == 0) {
                    continue;
                }
                auto earliest = Clock::time_point::max();
                for (const auto& [row, r] : m_running) {
                    if (!r.background) {
                        earliest = std::min(earliest, r.deadline);
                    }
                }
                if (Clock::now() >= earliest) {
                    // A foreground hook ran out of time: SIGTERM, grace, SIGKILL of its tree.
                    for (auto it = m_running.begin(); it != m_running.end();) {
                        auto current = it++;
                        if (!current->second.background && Clock::now() >= current->second.deadline) {
                            auto row = current->first;
                            auto outcome = m_supervisor.wait(row, std::chrono::milliseconds(0), m_ctx.teardown_grace);
                            outcome.timed_out = true;
                            finish(row, outcome);
                        }
                    }
                    continue;
                }
                wait_for_events(earliest);
                collect_finished();
                end_leftovers();
            }
        }
        // Rows of hooks a stop kept from starting are closed (not_started).
        release_reserved();
        if (m_stopping) {
            stop_everything(true);
            // Before the caller gives the lease back: what finished stays finished.
            m_store.flush_results(true);
            return ExitCode::interrupted;
        }
        // Every foreground hook is done: end the background ones, each within its own deadline.
        std::vector<std::string> background;
        for (const auto& [row, r] : m_running) {
            background.push_back(row);
        }
        if (!background.empty()) {
            auto outcomes = m_supervisor.teardown(background, m_ctx.teardown_grace);
            for (const auto& o : outcomes) {
                finish(o.row_id, o);
            }
        }
        collect_finished();
        return ExitCode::ok;
    } catch (const LeaseLost&) {
        // Not ours any more: stop our hooks without writing results.
        release_reserved();
        m_supervisor.teardown({}, m_ctx.teardown_grace);
        m_running.clear();
        throw;
    }
}

void SnapshotRun::launch(const PlannedHook& planned, bool background)
{
    if (!planned.hook.problem.empty()) {
        record(planned, std::nullopt, {}, planned.hook.problem);
        return;
    }
    LaunchResult result;
    try {
        const auto reserved = m_reserved.find(&planned);
        if (reserved != m_reserved.end()) {
            auto request = std::move(reserved->second);
            m_reserved.erase(reserved);
            result = m_supervisor.launch(request);
        } else {
            result = m_supervisor.launch(launch_request(planned, background));
        }
    } catch (const LeaseLost&) {
        throw;
    } catch (const pqxx::failure&) {
        throw; // the database, not this hook: nothing could be recorded anyway
    } catch (const std::exception& e) {
        // This hook cannot start (its directory, its argv, its cgroup leaf):
        // it fails, the others still run.
        record(planned, std::nullopt, {}, fmt::format("cannot start hook: {}", e.what()));
        return;
    }
    if (!result.started()) {
        record(planned, std::nullopt, result.row_id, result.failure->message);
        return;
    }
    m_store.mark_started(planned.result_id, result.row_id);
    log::info("hook started", {{"hook", planned.hook.id()},
                               {"process", result.row_id},
                               {"pid", std::to_string(result.pid)},
                               {"background", background ? "yes" : "no"}});
    m_running[result.row_id] = Running{&planned, result.row_id, Clock::now() + planned.config.timeout, background};
}

void SnapshotRun::release_reserved()
{
    std::vector<std::string> rows;
    for (const auto& [planned, request] : std::exchange(m_reserved, {})) {
        rows.push_back(request.row_id);
    }
    m_supervisor.release_reservations(rows);
}

LaunchRequest SnapshotRun::launch_request(const PlannedHook& planned, bool background) const
{
    return launch_request_for(m_ctx.snapshot, m_ctx.snap_dir, planned, background);
}

void SnapshotRun::wait_for_events(Clock::time_point deadline)
{
    auto wake = std::min(deadline, m_lease.next_renewal());
    if (auto flush = m_store.next_result_flush()) {
        wake = std::min(wake, *flush);
    }
    if (m_ctx.side_work_due) {
        if (auto side = m_ctx.side_work_due()) {
            wake = std::min(wake, *side);
        }
    }
    pollfd fds[2] = {{m_supervisor.epoll_fd(), POLLIN, 0}, {m_stop.fd(), POLLIN, 0}};
    auto timeout = until(wake);
    int rc = ::poll(fds, 2, static_cast<int>(std::min<long long>(timeout.count() + 1, 60'000)));
    if (rc < 0 && errno != EINTR) {
        throw_errno("poll");
    }
    if (m_stop.take() > 0 && !m_stopping) {
        log::warn("stop requested: no new hooks, tearing down what runs");
        m_stopping = true;
    }
    m_supervisor.process_events();
    m_store.flush_results();
    if (m_ctx.side_work_due && m_ctx.side_work) {
        if (auto side = m_ctx.side_work_due(); side && *side <= Clock::now()) {
            m_ctx.side_work();
        }
    }
    if (m_lease.renewal_due()) {
        if (!m_lease.renew(m_conn)) {
            throw LeaseLost(fmt::format("lost the lease on snapshot {}", m_ctx.snapshot.id));
        }
    }
}

void SnapshotRun::end_leftovers()
{
    // A foreground hook is done when its own process exits: what it left
    // behind is killed at once (Supervisor::wait logs it), and its result is
    // the one it reported, not a timeout after waiting for the leftovers.
    std::vector<std::string> done;
    for (const auto& [row, r] : m_running) {
        if (!r.background && m_supervisor.left_processes(row)) {
            done.push_back(row);
        }
    }
    for (const auto& row : done) {
        finish(row, m_supervisor.wait(row, std::chrono::milliseconds(0), m_ctx.teardown_grace));
    }
}

void SnapshotRun::collect_finished()
{
    for (const auto& outcome : m_supervisor.take_finished()) {
        finish(outcome.row_id, outcome);
    }
}

void SnapshotRun::finish(const std::string& row_id, const ProcessOutcome& outcome)
{
    auto it = m_running.find(row_id);
    if (it == m_running.end()) {
        return;
    }
    const PlannedHook& planned = *it->second.planned;
    m_running.erase(it);
    record(planned, outcome, row_id, {});
}

void SnapshotRun::record(const PlannedHook& planned, const std::optional<ProcessOutcome>& outcome,
                         const std::string& row_id, const std::string& start_error, bool stopped)
{
    auto dir = hook_dir(planned);
    HookOutput output;
    HookEnd end;
    if (!outcome) {
        end = HookEnd::not_started(start_error);
    } else {
        if (outcome->exit_code) {
            end.exit = ProcessExit{*outcome->exit_code, outcome->term_signal};
        } else if (outcome->term_signal) {
            end.exit = ProcessExit{128 + *outcome->term_signal, outcome->term_signal};
        } else {
            end.exit = ProcessExit{0, std::nullopt};
        }
        if (outcome->timed_out || outcome->end_reason == "timed_out") {
            end.timed_out_after = planned.config.timeout;
        }
        end.torn_down = outcome->end_reason == "killed_on_teardown" || planned.hook.background || stopped;
        try {
            output = parse_hook_output_file(stdout_log(dir, planned.hook.file_name, row_id));
        } catch (const std::exception& e) {
            output.errors.push_back(fmt::format("cannot read hook output: {}", e.what()));
        }
    }
    auto result = decide_hook_result(output, end);
    OutputFiles files;
    try {
        files = list_output_files(dir);
    } catch (const std::exception& e) {
        log::warn("cannot list output files", {{"hook", planned.hook.id()}, {"error", e.what()}});
    }
    m_store.record(planned.result_id, result, files);
    for (const auto& note : output.notes) {
        log::debug("hook output note", {{"hook", planned.hook.id()}, {"note", note}});
    }
    if (output.title) {
        m_store.set_title(*output.title);
    }
    if (!output.discovered.empty()) {
        int depth = m_ctx.snapshot.depth + 1;
        if (depth > m_ctx.snapshot.max_depth) {
            log::info("discovered URLs not followed: crawl max depth reached",
                      {{"hook", planned.hook.id()}, {"count", std::to_string(output.discovered.size())}});
        } else {
            auto urls = m_filter.accept(output.discovered, planned.hook.id());
            int added = m_store.add_children(urls, depth, m_ctx.snapshot.max_urls);
            log::info("discovered URLs", {{"hook", planned.hook.id()},
                                          {"found", std::to_string(output.discovered.size())},
                                          {"added", std::to_string(added)},
                                          {"skipped", std::to_string(urls.skipped.size())}});
        }
    }
    // With what the supervisor's "process exited" line would say (at debug here).
    log::Fields fields{{"hook", planned.hook.id()},
                       {"process", row_id},
                       {"status", std::string(to_string(result.status))},
                       {"error", result.error.value_or("")}};
    if (outcome) {
        fields.push_back({"exit_code", outcome->exit_code ? std::to_string(*outcome->exit_code) : ""});
        fields.push_back({"signal", outcome->term_signal ? std::to_string(*outcome->term_signal) : ""});
        fields.push_back({"end_reason", outcome->end_reason});
        fields.push_back({"elapsed_ms", std::to_string(outcome->elapsed.count())});
    }
    log::info("hook finished", fields);
}

bool SnapshotRun::reported_result(const PlannedHook& planned, const std::string& row_id) const
{
    try {
        return parse_hook_output_file(stdout_log(hook_dir(planned), planned.hook.file_name, row_id))
            .archive_result.has_value();
    } catch (const std::exception&) {
        return false; // unreadable: it cannot be recorded either, so it runs again
    }
}

void SnapshotRun::stop_everything(bool requeue)
{
    std::vector<std::string> rows;
    for (const auto& [row, r] : m_running) {
        rows.push_back(row);
    }
    std::map<std::string, ProcessOutcome> outcomes;
    if (!rows.empty()) {
        for (auto& outcome : m_supervisor.teardown(rows, m_ctx.teardown_grace)) {
            outcomes[outcome.row_id] = std::move(outcome);
        }
    }
    // A hook whose work was done when the stop reached it keeps its result:
    // requeueing it would run a finished hook a second time. Done means it
    // ended on its own (between the stop request and the teardown), or it had
    // already printed its ArchiveResult and went at the SIGTERM, as a shell
    // between its last line and its exit does. Only hooks the stop cut short
    // are requeued.
    for (const auto& [row, r] : std::exchange(m_running, {})) {
        const auto found = outcomes.find(row);
        if (found != outcomes.end()) {
            const ProcessOutcome& o = found->second;
            const bool exited = o.exit_code || o.term_signal;
            if (exited && (!o.stop_signalled || (!o.killed && reported_result(*r.planned, row)))) {
                record(*r.planned, o, row, {}, o.stop_signalled);
                continue;
            }
        }
        if (requeue) {
            m_store.requeue(r.planned->result_id, "interrupted: the snapshot worker was stopped");
        }
    }
}

} // namespace orch
