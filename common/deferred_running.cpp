#include "common/supervisor.hpp"

// Supervisor's deferred row writes (see Supervisor::PendingRunning): a hook's
// row goes queued -> running only once it has run k_running_write_delay, or
// queued -> exited in one statement with its identity when it ends sooner; and
// an exit is written while the supervisor goes on with the tree's cleanup
// (m_in_flight), settled before the connection is used again.

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
        process_table::mark_running(m_conn, it->first, it->second.identity, it->second.pgid, since);
        it = m_pending_running.erase(it);
    }
}

void Supervisor::record_exit(const std::string& row_id, const process_table::EndRecord& end)
{
    settle_write();
    const auto it = m_pending_running.find(row_id);
    if (it == m_pending_running.end()) {
        m_in_flight.emplace(process_table::send_mark_exited(m_conn, row_id, end));
        return;
    }
    const auto since = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - it->second.spawned);
    m_in_flight.emplace(process_table::send_mark_ran(m_conn, row_id, it->second.identity, it->second.pgid, since, end));
    m_pending_running.erase(it);
}

void Supervisor::settle_write()
{
    if (!m_in_flight) {
        return;
    }
    // Reset even when finish() throws: the statement is over either way.
    auto statement = std::move(*m_in_flight);
    m_in_flight.reset();
    statement.finish();
}

} // namespace orch
