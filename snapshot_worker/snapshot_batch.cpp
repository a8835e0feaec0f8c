#include "snapshot_worker/snapshot_batch.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/work/work_states.hpp"

#include <utility>

namespace orch {

SnapshotBatch::SnapshotBatch(pqxx::connection& conn, Supervisor& supervisor) : m_conn(conn), m_supervisor(supervisor)
{
}

void SnapshotBatch::take(std::vector<std::pair<ClaimedSnapshot, std::map<std::string, ResultState>>> claims,
                         const Requests& requests)
{
    const std::size_t first = m_ahead.size();
    for (auto& [claim, results] : claims) {
        m_ahead.push_back(Claimed{std::move(claim), std::move(results), {}});
    }
    if (m_ahead.size() - first < 2) {
        return; // one snapshot's rows are reserved by its run, as ever
    }
    std::vector<LaunchRequest> all;
    std::vector<std::pair<std::size_t, std::string>> owners; // claim index, hook id
    for (std::size_t i = first; i < m_ahead.size(); ++i) {
        for (auto& request : requests(m_ahead[i])) {
            owners.emplace_back(i, request.labels.hook_name.value_or(""));
            all.push_back(std::move(request));
        }
    }
    m_supervisor.reserve(all);
    for (std::size_t k = 0; k < all.size(); ++k) {
        m_ahead[owners[k].first].reserved[owners[k].second] = std::move(all[k]);
    }
}

SnapshotBatch::Claimed SnapshotBatch::pop()
{
    auto next = std::move(m_ahead.front());
    m_ahead.pop_front();
    return next;
}

void SnapshotBatch::hold(std::unique_ptr<SnapshotStore> store, Clock::time_point finished)
{
    m_held.push_back(Held{std::move(store), finished});
}

std::vector<SnapshotStore*> SnapshotBatch::held() const
{
    std::vector<SnapshotStore*> out;
    for (const auto& h : m_held) {
        out.push_back(h.store.get());
    }
    return out;
}

std::optional<SnapshotBatch::Clock::time_point> SnapshotBatch::seal_due() const
{
    if (m_held.empty()) {
        return std::nullopt;
    }
    return m_held.front().finished + k_write_behind_window;
}

void SnapshotBatch::seal_held()
{
    if (m_held.empty()) {
        return;
    }
    bool first = true;
    for (auto& h : std::exchange(m_held, {})) {
        try {
            const auto outcome = h.store->seal(first ? m_supervisor.take_held_exits()
                                                     : std::vector<process_table::HeldExit>{});
            log::info("snapshot sealed", {{"snapshot", h.store->snapshot_id()}, {"outcome", outcome}});
        } catch (const LeaseLost& e) {
            // Its run is over and whoever holds it now runs it again: nothing of
            // it is ours to write. The snapshot running meanwhile (this is called
            // from its loop) must not be cut short for it, which would leave that
            // one leased to us, its hooks torn down, until recovery frees it.
            log::warn("a held snapshot's lease is gone; not sealed by us",
                      {{"snapshot", h.store->snapshot_id()}, {"error", e.what()}});
        }
        first = false;
    }
}

void SnapshotBatch::release_ahead()
{
    for (auto& claimed : std::exchange(m_ahead, {})) {
        std::vector<std::string> rows;
        for (const auto& [hook, request] : claimed.reserved) {
            rows.push_back(request.row_id);
        }
        m_supervisor.release_reservations(rows);
        if (work_states::return_unstarted_claim(m_conn, claimed.claim.snapshot_id, claimed.claim.owner)) {
            log::info("claimed snapshot given back unstarted", {{"snapshot", claimed.claim.snapshot_id}});
        }
    }
}

} // namespace orch
