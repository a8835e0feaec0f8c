#include "common/recorder/supervisor.hpp"

#include "common/supervision/child_environment.hpp"
#include "common/db/database_outage.hpp"
#include "common/recorder/process_table.hpp"
#include "common/base/random_id.hpp"

// Supervisor::reserve: the rows of launches to come, written in one statement.
// A snapshot's hooks run one after another, each launch inserting its row: one
// round trip and one server transaction per hook was the largest share of what
// recording a hook cost (bench row 2). Reserved up front, a snapshot's hooks
// cost one insert; their exits ride on its seal. Rows are written before any of
// their processes exists, so crash recovery is what it was: a queued row of a
// dead supervisor is closed, whatever became of its process (cookie, leaf).
namespace orch {

void Supervisor::reserve(std::vector<LaunchRequest>& requests)
{
    if (requests.empty()) {
        return;
    }
    std::vector<process_table::NewRow> rows;
    std::vector<std::pair<std::string, std::string>> reserved; // row id, cookie
    for (auto& request : requests) {
        if (request.row_id.empty()) {
            request.row_id = random_uuid();
        }
        const auto cookie = random_uuid();
        rows.push_back(queued_row(request, request.row_id, cookie, child_environment(request.env, cookie)));
        reserved.emplace_back(request.row_id, cookie);
    }
    InFlightGuard guard{*this};
    settle_write();
    // Rows reserved by a statement the server broke off were not written.
    ride_out(m_conn, [&] { process_table::send_insert_queued_rows(m_conn, rows).finish(); });
    for (auto& [id, cookie] : reserved) {
        m_reservations[id] = std::move(cookie);
    }
}

void Supervisor::release_reservations()
{
    for (const auto& [id, cookie] : std::exchange(m_reservations, {})) {
        hold_unstarted(id, "not_started", "");
    }
}

void Supervisor::release_reservations(const std::vector<std::string>& row_ids)
{
    for (const auto& id : row_ids) {
        if (m_reservations.erase(id) > 0) {
            hold_unstarted(id, "not_started", "");
        }
    }
}

void Supervisor::hold_unstarted(const std::string& row_id, const std::string& end_reason, const std::string& error)
{
    const auto now = std::chrono::steady_clock::now();
    process_table::EndRecord end{std::nullopt, std::nullopt, end_reason, std::nullopt,
                                 error.empty() ? std::nullopt : std::optional<std::string>(error)};
    m_held_exits.push_back(process_table::HeldExit{row_id, std::nullopt, 0, now, now, end, std::nullopt});
    m_trees.rearm();
}

} // namespace orch
