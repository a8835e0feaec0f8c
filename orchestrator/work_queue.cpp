#include "orchestrator/work_queue.hpp"

#include "common/db/array_parameter.hpp"
#include "common/db/autocommit_statement.hpp"
#include "common/base/random_id.hpp"

namespace orch {

std::vector<ClaimedCrawl> claim_due_crawls(pqxx::connection& conn, std::size_t limit, std::chrono::seconds ttl,
                                           const std::vector<std::string>& live_owners)
{
    // One statement in autocommit, committed without waiting for the WAL flush: it
    // is on the path from `add` to a running crawl worker. Safe, because the claim
    // only books the crawl for the worker row we are about to spawn, and that worker
    // claims it again itself, synchronously, before it runs anything (Lease::claim
    // accepts a lease that names its row, or none): a claim lost in a database crash
    // leaves the crawl unleased, and our worker takes it then, or finds another's
    // lease and exits 8. The CTE is an optimisation fence: LIMIT applies before the
    // UPDATE touches rows; row_number may not share a SELECT with FOR UPDATE, so
    // the pairing with the owners happens in the next CTE.
    // The worker row ids are made here, fresh for each call: when the connection
    // breaks after the claim committed, the retry finds the crawls leased to them
    // (ride_out_in_doubt) instead of leaving them booked for workers that never
    // start until their leases expire.
    std::vector<std::string> owners;
    for (std::size_t i = 0; i < limit; ++i) {
        owners.push_back(random_uuid());
    }
    const auto owner_ids = array_parameter(owners);
    auto r = ride_out_in_doubt(
        conn,
        [&] {
            conn.prepare("work_queue.claim_due_crawls",
                         std::string("WITH due AS ("
                                     "  SELECT id FROM crawl "
                                     "  WHERE status IN ('queued', 'started') AND retry_at <= now() "
                                     "    AND (lease_owner IS NULL OR (lease_expires_at < now() "
                                     "         AND lease_owner <> ALL ($3::uuid[]))) "
                                     "  ORDER BY retry_at, created_at LIMIT cardinality($1::uuid[]) "
                                     "  FOR UPDATE SKIP LOCKED), "
                                     "numbered AS (SELECT id, row_number() OVER () AS n FROM due), "
                                     "owners AS (SELECT o, n FROM unnest($1::uuid[]) WITH ORDINALITY AS t(o, n)) "
                                     "UPDATE crawl c SET lease_owner = owners.o, "
                                     "  lease_expires_at = now() + make_interval(secs => $2), modified_at = now() "
                                     "FROM numbered JOIN owners ON owners.n = numbered.n, ") +
                             k_async_commit + " WHERE c.id = numbered.id RETURNING c.id, c.lease_owner");
            pqxx::nontransaction tx(conn);
            return tx.exec_prepared("work_queue.claim_due_crawls", owner_ids, static_cast<double>(ttl.count()),
                                    array_parameter(live_owners));
        },
        [&]() -> std::optional<pqxx::result> {
            conn.prepare("work_queue.claimed_before",
                         "SELECT id, lease_owner FROM crawl WHERE lease_owner = ANY($1::uuid[]) AND status <> 'sealed'");
            pqxx::nontransaction tx(conn);
            auto earlier = tx.exec_prepared("work_queue.claimed_before", owner_ids);
            return earlier.empty() ? std::nullopt : std::optional<pqxx::result>(std::move(earlier));
        });
    std::vector<ClaimedCrawl> out;
    for (const auto& row : r) {
        out.push_back(ClaimedCrawl{row[0].as<std::string>(), row[1].as<std::string>()});
    }
    return out;
}

bool crawl_paused(pqxx::connection& conn, const std::string& crawl_id)
{
    return ride_out_transaction(conn, [&](pqxx::read_transaction& tx) -> bool {
        auto r = tx.exec_params("SELECT status = 'paused' FROM crawl WHERE id = $1", crawl_id);
        return !r.empty() && r[0][0].as<bool>();
    });
}

void release_crawl(pqxx::connection& conn, const std::string& crawl_id, const std::string& owner,
                   std::chrono::seconds backoff)
{
    return ride_out_transaction(conn, [&](pqxx::work& tx) {
        // The worker may have given the crawl back itself before exiting (with its
        // own, shorter back-off): the back-off still applies, but never shortens one.
        tx.exec_params0("UPDATE crawl SET lease_owner = NULL, lease_expires_at = NULL, "
                        " retry_at = greatest(retry_at, now() + make_interval(secs => $3)), modified_at = now() "
                        "WHERE id = $1 AND (lease_owner = $2 OR lease_owner IS NULL) AND status <> 'sealed'",
                        crawl_id, owner, static_cast<double>(backoff.count()));
    });
}

LeaseRecovery release_dead_leases(pqxx::connection& conn)
{
    return ride_out_transaction(conn, [&](pqxx::work& tx) -> LeaseRecovery {
        // Each statement starts from the leased rows ("lease_owner IS NOT NULL" picks the
        // partial indexes of migration 0006): a handful, however long the history.
        LeaseRecovery out;
        tx.exec0("UPDATE archive_result ar SET status = 'queued', error = 'interrupted: its worker died', "
                 " modified_at = now() FROM snapshot s JOIN process p ON p.id = s.lease_owner "
                 "WHERE s.lease_owner IS NOT NULL AND ar.snapshot_id = s.id AND ar.status = 'started' "
                 " AND p.status = 'exited' AND s.status <> 'sealed'");
        out.snapshots = static_cast<int>(
            tx.exec0("UPDATE snapshot s SET lease_owner = NULL, lease_expires_at = NULL, retry_at = now(), "
                     " modified_at = now() FROM process p "
                     "WHERE s.lease_owner IS NOT NULL AND p.id = s.lease_owner AND p.status = 'exited' "
                     " AND s.status <> 'sealed'")
                .affected_rows());
        out.crawls = static_cast<int>(
            tx.exec0("UPDATE crawl c SET lease_owner = NULL, lease_expires_at = NULL, retry_at = now(), "
                     " modified_at = now() FROM process p "
                     "WHERE c.lease_owner IS NOT NULL AND p.id = c.lease_owner AND p.status = 'exited' "
                     " AND c.status <> 'sealed'")
                .affected_rows());
        return out;
    });
}

std::vector<std::string> stalled_lease_owners(pqxx::connection& conn, const std::string& machine_id)
{
    return ride_out_transaction(conn, [&](pqxx::read_transaction& tx) -> std::vector<std::string> {
        auto r = tx.exec_params("SELECT p.id FROM process p WHERE p.machine_id = $1 AND p.status = 'running' AND ("
                                "  EXISTS (SELECT 1 FROM snapshot s WHERE s.lease_owner = p.id AND s.status <> 'sealed' "
                                "          AND s.lease_expires_at < now()) OR "
                                "  EXISTS (SELECT 1 FROM crawl c WHERE c.lease_owner = p.id AND c.status <> 'sealed' "
                                "          AND c.lease_expires_at < now()))",
                                machine_id);
        std::vector<std::string> out;
        for (const auto& row : r) {
            out.push_back(row[0].as<std::string>());
        }
        return out;
    });
}

std::vector<UnfinishedCrawl> unfinished_crawls(pqxx::connection& conn, const std::vector<std::string>& crawl_ids)
{
    return ride_out_transaction(conn, [&](pqxx::read_transaction& tx) -> std::vector<UnfinishedCrawl> {
        auto r = tx.exec_params("SELECT id, to_char(retry_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
                                "FROM crawl WHERE id = ANY ($1::uuid[]) AND status IN ('queued', 'started') "
                                "ORDER BY created_at",
                                array_parameter(crawl_ids));
        std::vector<UnfinishedCrawl> out;
        for (const auto& row : r) {
            out.push_back(UnfinishedCrawl{row[0].as<std::string>(), row[1].as<std::string>()});
        }
        return out;
    });
}

bool work_due_within(pqxx::connection& conn, std::chrono::seconds window)
{
    return ride_out_transaction(conn, [&](pqxx::read_transaction& tx) -> bool {
        auto secs = static_cast<double>(window.count());
        return tx
            .exec_params1("SELECT EXISTS (SELECT 1 FROM crawl WHERE status IN ('queued', 'started') "
                          "   AND retry_at <= now() + make_interval(secs => $1) "
                          "   AND (lease_owner IS NULL OR lease_expires_at < now() + make_interval(secs => $1))) "
                          "OR EXISTS (SELECT 1 FROM crawl_schedule WHERE enabled "
                          "   AND next_run_at <= now() + make_interval(secs => $1))",
                          secs)[0]
            .as<bool>();
    });
}

} // namespace orch
