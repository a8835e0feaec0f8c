#include "common/work/work_states.hpp"

#include "common/db/database_outage.hpp"

// work_states: a crawl worker's transitions of its snapshots.
namespace orch::work_states {

bool return_unstarted_claim(pqxx::connection& conn, const std::string& snapshot_id, const std::string& owner)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params("UPDATE snapshot SET lease_owner = NULL, lease_expires_at = NULL, retry_at = now(), "
                              " attempts = greatest(attempts - 1, 0), modified_at = now() "
                              "WHERE id = $1 AND (lease_owner = $2) IS TRUE AND status <> 'sealed' RETURNING 1",
                              snapshot_id, owner);
    });
    return !r.empty();
}

void give_back_snapshot(pqxx::work& tx, const std::string& snapshot_id, const std::string& crawl_id,
                        const std::string& worker, const std::string& reason)
{
    tx.exec_params0("UPDATE snapshot SET lease_owner = NULL, lease_expires_at = NULL, error = $4, "
                    " attempts = greatest(attempts - 1, 0), retry_at = now(), modified_at = now() "
                    "WHERE id = $1 AND crawl_id = $2 AND status <> 'sealed' AND (lease_owner = $3) IS TRUE",
                    snapshot_id, crawl_id, worker, reason);
}

void seal_snapshot_failed(pqxx::work& tx, const std::string& snapshot_id, const std::string& error,
                          const std::string& sealed_by)
{
    tx.exec_params0("UPDATE snapshot SET status = 'sealed', outcome = 'failed', error = $2, "
                    " sealed_at = clock_timestamp(), sealed_by = $3, retry_at = NULL, lease_owner = NULL, "
                    " lease_expires_at = NULL, modified_at = now() "
                    "WHERE id = $1",
                    snapshot_id, error, sealed_by);
}

void retry_snapshot_later(pqxx::work& tx, const std::string& snapshot_id, const std::string& error,
                          std::chrono::seconds backoff)
{
    tx.exec_params0("UPDATE snapshot SET lease_owner = NULL, lease_expires_at = NULL, error = $2, "
                    " retry_at = now() + make_interval(secs => $3), modified_at = now() WHERE id = $1",
                    snapshot_id, error, static_cast<double>(backoff.count()));
}

int seal_unsealed_snapshots(pqxx::work& tx, const std::string& crawl_id, const std::string& outcome,
                            const std::string& error, const std::string& sealed_by)
{
    auto r = tx.exec_params("UPDATE snapshot SET status = 'sealed', outcome = $2, error = $3, "
                            " sealed_at = clock_timestamp(), sealed_by = $4, retry_at = NULL, lease_owner = NULL, "
                            " lease_expires_at = NULL, modified_at = now() "
                            "WHERE crawl_id = $1 AND status <> 'sealed' RETURNING id",
                            crawl_id, outcome, error, sealed_by);
    return static_cast<int>(r.size());
}

} // namespace orch::work_states
