#include "snapshot_worker/snapshot_store.hpp"

#include "common/autocommit_statement.hpp"
#include "common/errors.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

// Per-hook bookkeeping does not wait for the WAL flush: a PostgreSQL crash can
// lose the last few hundred milliseconds of it, which only reruns those hooks
// (at-least-once, as after a worker crash). The seal commits synchronously and,
// the WAL being sequential, makes every earlier write of this snapshot durable
// before anyone can see the snapshot sealed. Each is one prepared statement in
// autocommit (exec_autocommit, k_async_commit): one round trip.

// Appended to every write: the statement matches nothing unless we still hold the
// snapshot's lease. FOR SHARE makes a concurrent claim wait for our commit, so a
// write can never land after the lease changed hands.
constexpr const char* k_fence = "EXISTS (SELECT 1 FROM snapshot f WHERE f.id = $1 AND f.lease_owner = $2 FOR SHARE)";

std::string json_text(const nlohmann::json& j)
{
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

SnapshotStore::SnapshotStore(pqxx::connection& conn, std::string snapshot_id)
    : m_conn(conn), m_snapshot_id(std::move(snapshot_id))
{
}

std::optional<SnapshotRecord> SnapshotStore::load()
{
    // One statement: autocommit, no BEGIN/ROLLBACK round trips.
    pqxx::nontransaction tx(m_conn);
    auto r = tx.exec_params("SELECT s.id, s.crawl_id, s.url, s.depth, s.status, c.max_depth, c.max_urls, "
                            "       c.config::text, c.cancel_requested_at IS NOT NULL OR coalesce(c.outcome = 'cancelled', false) "
                            "FROM snapshot s JOIN crawl c ON c.id = s.crawl_id WHERE s.id = $1",
                            m_snapshot_id);
    if (r.empty()) {
        return std::nullopt;
    }
    const auto& row = r[0];
    SnapshotRecord rec;
    rec.id = row[0].as<std::string>();
    rec.crawl_id = row[1].as<std::string>();
    rec.url = row[2].as<std::string>();
    rec.depth = row[3].as<int>();
    rec.status = row[4].as<std::string>();
    rec.max_depth = row[5].as<int>();
    if (!row[6].is_null()) {
        rec.max_urls = row[6].as<int>();
    }
    rec.crawl_config = nlohmann::json::parse(row[7].as<std::string>());
    rec.crawl_cancelled = row[8].as<bool>();
    m_crawl_id = rec.crawl_id;
    return rec;
}

void SnapshotStore::require(const pqxx::result& r, const char* what) const
{
    if (r.affected_rows() == 0 && r.empty()) {
        throw LeaseLost(fmt::format("lost the lease on snapshot {} while {}", m_snapshot_id, what));
    }
}

std::map<std::string, ResultState> SnapshotStore::ensure_results(const std::vector<Hook>& hooks)
{
    nlohmann::json list = nlohmann::json::array();
    for (const auto& h : hooks) {
        list.push_back({{"plugin", h.plugin}, {"hook", h.id()}});
    }
    pqxx::work tx(m_conn);
    tx.exec0("SET LOCAL synchronous_commit = off"); // see the top of this file
    auto fence = tx.exec_params(fmt::format("SELECT 1 WHERE {}", k_fence), m_snapshot_id, m_owner);
    require(fence, "creating archive results");
    tx.exec_params0("INSERT INTO archive_result (snapshot_id, plugin, hook_name) "
                    "SELECT $1, e->>'plugin', e->>'hook' FROM jsonb_array_elements($2::jsonb) e "
                    "ON CONFLICT (snapshot_id, hook_name) DO NOTHING",
                    m_snapshot_id, json_text(list));
    auto rows = tx.exec_params("SELECT hook_name, id, status FROM archive_result WHERE snapshot_id = $1",
                               m_snapshot_id);
    tx.commit();
    std::map<std::string, ResultState> out;
    for (const auto& row : rows) {
        out[row[0].as<std::string>()] = ResultState{row[1].as<std::string>(), row[2].as<std::string>()};
    }
    return out;
}

void SnapshotStore::mark_started(const std::string& result_id, const std::string& process_id)
{
    auto r = exec_autocommit(m_conn, "snapshot_store.mark_started",
                             fmt::format("UPDATE archive_result SET status = 'started', process_id = $4, "
                                         " start_ts = now(), end_ts = NULL, error = NULL, attempts = attempts + 1, "
                                         " modified_at = now() FROM {} "
                                         "WHERE id = $3 AND snapshot_id = $1 AND {} RETURNING 1",
                                         k_async_commit, k_fence),
                             m_snapshot_id, m_owner, result_id, process_id);
    require(r, "starting a hook");
}

void SnapshotStore::record(const std::string& result_id, const HookResult& result, const OutputFiles& files)
{
    std::optional<std::string> output_json;
    if (!result.output_json.is_null()) {
        output_json = json_text(result.output_json);
    }
    auto r = exec_autocommit(m_conn, "snapshot_store.record",
                             fmt::format("UPDATE archive_result SET status = $4, output_str = $5, "
                                         " output_json = $6::jsonb, error = $7, output_files = $8::jsonb, "
                                         " output_size = $9, end_ts = now(), modified_at = now() FROM {} "
                                         "WHERE id = $3 AND snapshot_id = $1 AND {} RETURNING 1",
                                         k_async_commit, k_fence),
                             m_snapshot_id, m_owner, result_id, std::string(to_string(result.status)),
                             result.output_str, output_json, result.error, json_text(files.to_json()),
                             static_cast<long long>(files.total_size));
    require(r, "recording a result");
}

void SnapshotStore::requeue(const std::string& result_id, const std::string& why)
{
    auto r = exec_autocommit(m_conn, "snapshot_store.requeue",
                             fmt::format("UPDATE archive_result SET status = 'queued', error = $4, end_ts = now(), "
                                         " modified_at = now() FROM {} "
                                         "WHERE id = $3 AND snapshot_id = $1 AND {} RETURNING 1",
                                         k_async_commit, k_fence),
                             m_snapshot_id, m_owner, result_id, why);
    require(r, "requeueing a result");
}

void SnapshotStore::set_title(const std::string& title)
{
    pqxx::work tx(m_conn);
    auto r = tx.exec_params("UPDATE snapshot SET title = $3, modified_at = now() "
                            "WHERE id = $1 AND lease_owner = $2 RETURNING 1",
                            m_snapshot_id, m_owner, title);
    require(r, "setting the title");
    tx.commit();
}

int SnapshotStore::add_children(const std::vector<std::string>& urls, int depth, std::optional<int> max_urls)
{
    if (urls.empty()) {
        return 0;
    }
    pqxx::work tx(m_conn);
    auto fence = tx.exec_params(fmt::format("SELECT 1 WHERE {}", k_fence), m_snapshot_id, m_owner);
    require(fence, "adding discovered snapshots");
    std::vector<std::string> accepted = urls;
    if (max_urls) {
        // The crawl row lock serialises concurrent discoverers, so the limit holds exactly.
        tx.exec_params1("SELECT 1 FROM crawl WHERE id = $1 FOR UPDATE", m_crawl_id);
        auto existing = tx.exec_params1("SELECT count(*) FROM snapshot WHERE crawl_id = $1", m_crawl_id)[0].as<long>();
        long room = std::max(0L, static_cast<long>(*max_urls) - existing);
        if (static_cast<long>(accepted.size()) > room) {
            accepted.resize(static_cast<std::size_t>(room));
        }
    }
    auto r = tx.exec_params("INSERT INTO snapshot (crawl_id, parent_snapshot_id, url, depth) "
                            "SELECT $1, $2, u, $3 FROM jsonb_array_elements_text($4::jsonb) u "
                            "ON CONFLICT (crawl_id, url) DO NOTHING RETURNING id",
                            m_crawl_id, m_snapshot_id, depth, json_text(nlohmann::json(accepted)));
    tx.commit();
    return static_cast<int>(r.size());
}

std::string SnapshotStore::seal()
{
    pqxx::work tx(m_conn);
    auto counts = tx.exec_params1("SELECT count(*) FILTER (WHERE status = 'failed'), count(*) "
                                  "FROM archive_result WHERE snapshot_id = $1",
                                  m_snapshot_id);
    long failed = counts[0].as<long>();
    long total = counts[1].as<long>();
    std::string outcome = failed == 0 ? "succeeded" : failed == total ? "failed" : "partial";
    std::optional<std::string> error;
    if (failed > 0) {
        error = fmt::format("{} of {} hooks failed", failed, total);
    }
    auto r = tx.exec_params("UPDATE snapshot SET status = 'sealed', outcome = $3, error = $4, sealed_at = now(), "
                            " retry_at = NULL, lease_owner = NULL, lease_expires_at = NULL, modified_at = now() "
                            "WHERE id = $1 AND lease_owner = $2 RETURNING 1",
                            m_snapshot_id, m_owner, outcome, error);
    require(r, "sealing");
    tx.commit();
    return outcome;
}

} // namespace orch
