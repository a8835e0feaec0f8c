#include "common/work/work_states.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/db/database_outage.hpp"

#include <fmt/format.h>

// work_states: one item's lease, on either table (Lease's statements).
namespace orch::work_states {
namespace {

// Table names come from the enum, never from input, so composing them is safe.
const char* table_name(LeaseTable table)
{
    return table == LeaseTable::crawl ? "crawl" : "snapshot";
}

} // namespace

std::optional<int> claim(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                         const std::string& owner, std::chrono::seconds ttl)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(
            fmt::format("UPDATE {} SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3), "
                        " status = CASE WHEN status = 'queued' THEN 'started' ELSE status END, "
                        " started_at = coalesce(started_at, now()), attempts = attempts + 1, modified_at = now() "
                        "WHERE id = $1 AND status IN ('queued', 'started') "
                        "  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now()) "
                        "RETURNING attempts",
                        table_name(table)),
            item_id, owner, static_cast<double>(ttl.count()));
    });
    if (r.empty()) {
        return std::nullopt;
    }
    return r[0][0].as<int>();
}

std::optional<int> adopt(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                         const std::string& owner, std::chrono::seconds ttl)
{
    // The owner is matched as `(lease_owner = $2) IS TRUE` here, in renew() and
    // in release(): the row is found by its key, never through the lease_owner
    // index, which holds an entry per item the owner ever held until a vacuum
    // (snapshot_worker/snapshot_store.cpp, k_fence).
    // Not waiting for the WAL flush is safe: adopting changes no owner, only the
    // expiry. Lost in a server crash, the lease keeps the (durable) expiry of the
    // batched claim, and fencing on lease_owner, not the expiry, protects the item.
    auto r = exec_autocommit(conn, fmt::format("lease.adopt.{}", table_name(table)),
                             fmt::format("UPDATE {} SET lease_expires_at = now() + make_interval(secs => $3) FROM {} "
                                         "WHERE id = $1 AND (lease_owner = $2) IS TRUE AND status IN ('queued', 'started') "
                                         "RETURNING attempts",
                                         table_name(table), k_async_commit),
                             item_id, owner, static_cast<double>(ttl.count()));
    if (r.empty()) {
        return std::nullopt;
    }
    return r[0][0].as<int>();
}

bool renew(pqxx::connection& conn, LeaseTable table, const std::string& item_id, const std::string& owner,
           std::chrono::seconds ttl)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(fmt::format("UPDATE {} SET lease_expires_at = now() + make_interval(secs => $3) "
                                          "WHERE id = $1 AND (lease_owner = $2) IS TRUE RETURNING 1",
                                          table_name(table)),
                              item_id, owner, static_cast<double>(ttl.count()));
    });
    return !r.empty();
}

std::vector<std::string> renew_snapshots_of(pqxx::connection& conn, const std::string& crawl_id,
                                            const std::string& owner, std::chrono::seconds ttl)
{
    auto rows = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params("UPDATE snapshot SET lease_expires_at = now() + make_interval(secs => $2) "
                              "WHERE crawl_id = $3 AND lease_owner = $1 AND status <> 'sealed' RETURNING id",
                              owner, static_cast<double>(ttl.count()), crawl_id);
    });
    std::vector<std::string> out;
    for (const auto& row : rows) {
        out.push_back(row[0].as<std::string>());
    }
    return out;
}

bool release(pqxx::connection& conn, LeaseTable table, const std::string& item_id, const std::string& owner,
             std::chrono::seconds retry_after)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(fmt::format("UPDATE {} SET lease_owner = NULL, lease_expires_at = NULL, "
                                          " retry_at = now() + make_interval(secs => $3), modified_at = now() "
                                          "WHERE id = $1 AND (lease_owner = $2) IS TRUE RETURNING 1",
                                          table_name(table)),
                              item_id, owner, static_cast<double>(retry_after.count()));
    });
    return !r.empty();
}

std::optional<std::string> sealed_outcome_by(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                             const std::string& owner)
{
    auto r = exec_autocommit(
        conn, fmt::format("work_states.sealed_outcome_by.{}", table_name(table)),
        fmt::format("SELECT outcome FROM {} WHERE id = $1 AND status = 'sealed' AND sealed_by = $2", table_name(table)),
        item_id, owner);
    if (r.empty()) {
        return std::nullopt;
    }
    return r[0][0].as<std::string>();
}

// Starts from the leased rows ("lease_owner IS NOT NULL" picks the partial
// indexes of migration 0006): a handful, however long the history.
int free_exited_leases(pqxx::work& tx, LeaseTable table)
{
    return static_cast<int>(
        tx.exec0(fmt::format("UPDATE {0} t SET lease_owner = NULL, lease_expires_at = NULL, retry_at = now(), "
                             " modified_at = now() FROM process p "
                             "WHERE t.lease_owner IS NOT NULL AND p.id = t.lease_owner AND p.status = 'exited' "
                             " AND t.status <> 'sealed'",
                             table_name(table)))
            .affected_rows());
}

} // namespace orch::work_states
