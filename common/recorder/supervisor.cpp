#include "common/recorder/supervisor.hpp"

#include "common/base/log.hpp"
#include "common/base/random_id.hpp"
#include "common/db/machine.hpp"
#include "common/recorder/process_table.hpp"
#include "common/supervision/command_line.hpp"
#include "common/supervision/file_tail.hpp"

#include <algorithm>
#include <filesystem>

#include <unistd.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TreeOptions tree_options(const SupervisorOptions& options, const std::string& self_id)
{
    TreeOptions out;
    out.containment = options.containment;
    out.group = self_id;
    out.teardown_grace = options.teardown_grace;
    out.kill_timeout = options.kill_timeout;
    out.max_log_bytes = options.max_log_bytes;
    out.stop_signals = options.stop_signals;
    return out;
}

} // namespace

Supervisor::Supervisor(pqxx::connection& conn, SupervisorOptions options)
    : m_conn(conn), m_options(std::move(options)), m_self_id(m_options.self_row_id.value_or(random_uuid())),
      m_trees(tree_options(m_options, m_self_id), this)
{
    if (!m_options.self_row_id) {
        auto self = Pidfd::open(::getpid());
        const auto identity = capture_identity(*self, m_trees.boot_id(), std::nullopt);
        process_table::NewRow row;
        row.id = m_self_id;
        row.machine_id = m_options.machine_id;
        row.process_type = m_options.self_process_type;
        row.cmd = own_command_line();
        row.pwd = std::filesystem::current_path().string();
        row.containment = std::string(to_string(m_trees.containment_mode()));
        process_table::insert_running(m_conn, row, *identity, ::getpgrp());
        m_owns_self_row = true;
    }
    m_next_heartbeat = Clock::now() + m_options.heartbeat_interval;
    log::info("supervisor ready", {{"containment", std::string(to_string(m_trees.containment_mode()))},
                                   {"self", m_self_id},
                                   {"scope_dir", m_trees.containment().scope_dir().string()}});
    m_trees.rearm();
}

Supervisor::~Supervisor()
{
    try {
        if (const auto running = m_trees.running(); !running.empty()) {
            log::warn("supervisor destroyed with live trees; tearing them down",
                      {{"count", std::to_string(running.size())}});
            // The loop that would have taken a pending stop is gone (unwound by
            // a database outage given up on because of that very stop): it is
            // the first stop, and the trees get their grace. Taken, not peeked
            // at, so that only a further one kills them at once.
            if (m_options.stop_signals != nullptr) {
                m_options.stop_signals->take();
            }
            teardown();
        }
        m_trees.stop_adopted_orphans();
        release_reservations();
        write_held_exits();
        m_trees.close();
        if (m_owns_self_row) {
            // Its own usage so far: a process nobody waits for (a worker run by
            // hand) still has it, and a parent's reap later overwrites it with the
            // kernel's final figure.
            process_table::mark_exited(m_conn, m_self_id,
                                       {std::nullopt, std::nullopt, "exited", {}, {}, ResourceUsage::of_self_and_reaped()});
        }
    } catch (const std::exception& e) {
        log::error("supervisor shutdown failed", {{"error", e.what()}});
        // The teardown stopped at a database error (a PostgreSQL restart is a
        // common reason to be tearing down at all): no process outlives us
        // anyway.
        m_trees.kill_all();
        try {
            m_trees.close(); // a leaf kills its tree when destroyed; a fallback tree has nothing else
        } catch (const std::exception& close_error) {
            log::error("cannot close the process trees", {{"error", close_error.what()}});
        }
    }
}

void Supervisor::process_events()
{
    InFlightGuard guard{*this};
    m_trees.process_events();
    settle_write();
}

void Supervisor::leader_exited(const LeaderExit& exit)
{
    record_exit(exit.id,
                {exit.exit.exit_code, exit.exit.term_signal, exit.end_reason,
                 read_log_tail(exit.stdout_path, m_options.tail_bytes),
                 read_log_tail(exit.stderr_path, m_options.tail_bytes), exit.exit.usage},
                m_holds_exit.count(exit.id) != 0 && !exit.claimed);
}

void Supervisor::end_decided(const std::string& id, const std::string& end_reason)
{
    record_exit(id, {std::nullopt, std::nullopt, end_reason, {}, {}}, m_holds_exit.count(id) != 0);
}

void Supervisor::tree_finished(const ProcessOutcome& outcome)
{
    m_holds_exit.erase(outcome.row_id);
}

void Supervisor::events_handled()
{
    deferrable([this] { flush_due_running(); });
    deferrable([this] { flush_due_exits(); });
    if (Clock::now() >= m_next_heartbeat) {
        deferrable([this] { heartbeat(); });
    }
}

std::optional<Clock::time_point> Supervisor::next_due() const
{
    auto next = m_next_heartbeat;
    for (const auto& [id, pending] : m_pending_running) {
        next = std::min(next, pending.spawned + k_running_write_delay);
    }
    if (!m_held_exits.empty()) {
        next = std::min(next, m_held_exits.front().ended + m_options.exit_write_delay);
    }
    return next;
}

ProcessOutcome Supervisor::wait(const std::string& row_id, std::optional<milliseconds> timeout,
                                std::optional<milliseconds> grace)
{
    // The deadlines keep their time through a database outage: what cannot be
    // written now is held for later (deferrable).
    OutageWaitsDeferred defer;
    // The exit write may still be on its way (or held) when the tree is done:
    // written and settled before returning.
    InFlightGuard guard{*this};
    auto outcome = m_trees.wait(row_id, timeout, grace);
    write_held_exits_deferrable();
    return outcome;
}

void Supervisor::write_held_exits_deferrable()
{
    deferrable([this] {
        send_held_exits();
        settle_write();
    });
}

std::vector<ProcessOutcome> Supervisor::teardown(const std::vector<std::string>& row_ids,
                                                 std::optional<milliseconds> grace, TermTarget term_target)
{
    OutageWaitsDeferred defer; // as in wait()
    InFlightGuard guard{*this};
    auto outcomes = m_trees.teardown(row_ids, grace, term_target);
    write_held_exits_deferrable();
    return outcomes;
}

void Supervisor::set_while_blocked(std::function<void()> task)
{
    if (!task) {
        m_trees.set_while_blocked({});
        return;
    }
    m_trees.set_while_blocked([this, task = std::move(task)] {
        settle_write(); // the owner's statement must not meet one of ours in flight
        task();
    });
}

RecoveryReport Supervisor::recover(milliseconds grace)
{
    RecoveryOptions options;
    options.containment = m_options.containment;
    options.self_row_id = m_self_id;
    options.grace = grace;
    options.kill_timeout = m_options.kill_timeout;
    InFlightGuard guard{*this};
    auto report = cleanup_stale_running(m_conn, m_options.machine_id, options);
    m_trees.reap_children(); // may send an exit write
    settle_write();
    return report;
}

void Supervisor::heartbeat()
{
    settle_write();
    std::vector<std::string> ids{m_self_id};
    for (auto& id : m_trees.unreaped()) {
        ids.push_back(std::move(id));
    }
    process_table::heartbeat(m_conn, ids);
    m_next_heartbeat = Clock::now() + m_options.heartbeat_interval;
}

} // namespace orch
