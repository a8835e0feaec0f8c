#include "common/recorder/supervisor.hpp"

#include "common/db/database_outage.hpp"
#include "common/base/log.hpp"

#include <algorithm>

// Supervisor's deferred row writes (see Supervisor::PendingRunning): a hook's
// row goes queued -> running only once it has run k_running_write_delay, or
// queued -> exited in one statement with its identity when it ends sooner; a
// hook's exit is held for exit_write_delay so that another statement can
// carry it (m_held_exits); and any other exit is written while the supervisor
// goes on with the tree's cleanup (m_in_flight), settled before the connection
// is used again.

namespace orch {

using Clock = std::chrono::steady_clock;

void Supervisor::flush_due_running()
{
    const auto now = Clock::now();
    for (auto it = m_pending_running.begin(); it != m_pending_running.end();) {
        if (now - it->second.spawned < k_running_write_delay) {
            ++it;
            continue;
        }
        settle_write();
        const auto since = std::chrono::duration_cast<std::chrono::microseconds>(now - it->second.spawned);
        process_table::mark_running(m_conn, it->first, it->second.identity, it->second.pgid, since,
                                    it->second.cgroup_path);
        it = m_pending_running.erase(it);
    }
}

namespace {

// The later record wins, but does not erase what only the earlier one knew.
void merge_end(process_table::EndRecord& earlier, const process_table::EndRecord& later)
{
    auto keep_known = [](auto& mine, const auto& theirs) {
        if (theirs) {
            mine = theirs;
        }
    };
    earlier.end_reason = later.end_reason;
    keep_known(earlier.exit_code, later.exit_code);
    keep_known(earlier.term_signal, later.term_signal);
    keep_known(earlier.stdout_tail, later.stdout_tail);
    keep_known(earlier.stderr_tail, later.stderr_tail);
    keep_known(earlier.usage, later.usage);
}

} // namespace

void Supervisor::record_exit(const std::string& row_id, const process_table::EndRecord& end, bool hold)
{
    const auto now = Clock::now();
    const auto held = std::find_if(m_held_exits.begin(), m_held_exits.end(),
                                   [&row_id](const auto& e) { return e.id == row_id; });
    if (held != m_held_exits.end()) {
        // The later record wins, but does not erase what only the first one knew.
        merge_end(held->end, end);
        return;
    }
    process_table::HeldExit exit{row_id, std::nullopt, 0, now, now, end, std::nullopt};
    const auto running = m_pending_running.find(row_id);
    if (running != m_pending_running.end()) {
        exit.identity = running->second.identity;
        exit.pgid = running->second.pgid;
        exit.spawned = running->second.spawned;
        exit.cgroup_path = running->second.cgroup_path;
        m_pending_running.erase(running);
    }
    if (hold) {
        m_held_exits.push_back(std::move(exit));
        return;
    }
    settle_write();
    bool sent = false;
    deferrable([&] {
        if (exit.identity) {
            m_in_flight.emplace(ride_out(m_conn, [&] { return process_table::send_write_exits(m_conn, {exit}); }));
        } else {
            m_in_flight.emplace(ride_out(m_conn, [&] { return process_table::send_mark_exited(m_conn, row_id, end); }));
        }
        sent = true;
    });
    // Held again if the write fails (settle_write), like the exits held for
    // later; held at once when it could not be sent (deferrable).
    (sent ? m_in_flight_exits : m_held_exits).push_back(std::move(exit));
}

void Supervisor::flush_due_exits()
{
    if (m_held_exits.empty() || Clock::now() < m_held_exits.front().ended + m_options.exit_write_delay) {
        return;
    }
    send_held_exits();
}

void Supervisor::send_held_exits()
{
    if (m_held_exits.empty()) {
        return;
    }
    settle_write();
    TakenExits taken{*this, take_held_exits()};
    m_in_flight.emplace(ride_out(m_conn, [&] { return process_table::send_write_exits(m_conn, taken.exits); }));
    m_in_flight_exits = std::move(taken.exits);
    taken.written(); // from here on settle_write() holds them again if the statement fails
}

void Supervisor::restore_held_exits(std::vector<process_table::HeldExit> exits) noexcept
{
    if (exits.empty()) {
        return;
    }
    try {
        for (auto& exit : exits) {
            const auto later = std::find_if(m_held_exits.begin(), m_held_exits.end(),
                                            [&exit](const auto& e) { return e.id == exit.id; });
            if (later != m_held_exits.end()) {
                merge_end(exit.end, later->end);
                m_held_exits.erase(later);
            }
        }
        m_held_exits.insert(m_held_exits.begin(), std::make_move_iterator(exits.begin()),
                            std::make_move_iterator(exits.end()));
    } catch (const std::exception& e) {
        // Out of memory: the rows stay queued/running, as after a crash, and recovery closes them.
        log::error("held exits lost", {{"count", std::to_string(exits.size())}, {"error", e.what()}});
    }
}

std::vector<process_table::HeldExit> Supervisor::take_held_exits()
{
    return std::exchange(m_held_exits, {});
}

void Supervisor::write_held_exits()
{
    InFlightGuard guard{*this};
    deferrable([this] {
        send_held_exits();
        settle_write();
    });
}

void Supervisor::settle_write()
{
    if (!m_in_flight) {
        return;
    }
    // Reset even when finish() throws: the statement is over either way.
    TakenExits carried{*this, std::exchange(m_in_flight_exits, {})};
    try {
        auto statement = std::move(*m_in_flight);
        m_in_flight.reset();
        statement.finish();
    } catch (const pqxx::broken_connection& e) {
        // What it carried is held again (`carried`), for the next write once
        // the connection is back: an exit write is idempotent.
        if (!outage_waits_deferred()) {
            await_reconnect(m_conn, e);
        }
        return;
    }
    carried.written();
}

} // namespace orch
