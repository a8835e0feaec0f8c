#include "common/work/work_states.hpp"

#include "common/db/array_parameter.hpp"
#include "common/db/autocommit_statement.hpp"
#include "common/db/database_outage.hpp"

#include <fmt/format.h>

// work_states: a crawl's queue, recovery, crawl worker and operator transitions.
namespace orch::work_states {
namespace {

// Before the crawl worker registered: leased to the row its orchestrator claimed
// it for, named by $2 (--process-id) or by $3 (the cookie it put in our environment).
constexpr const char* k_held_for_us =
    "(lease_owner = $2::uuid OR lease_owner IN (SELECT p.id FROM process p WHERE p.cookie = $3 "
    "                                            AND p.status <> 'exited'))";

} // namespace

std::vector<CrawlClaim> claim_due_crawls(pqxx::connection& conn, const std::vector<std::string>& owners,
                                         std::chrono::seconds ttl, const std::vector<std::string>& live_owners)
{
    // One statement in autocommit, committed without waiting for the WAL flush: it
    // is on the path from `add` to a running crawl worker. Safe, because the claim
    // only books the crawl for the worker row the orchestrator is about to spawn,
    // and that worker claims it again itself, synchronously, before it runs
    // anything (claim() accepts a lease that names its row, or none): a claim lost
    // in a database crash leaves the crawl unleased, and the worker takes it then,
    // or finds another's lease and exits 8. The CTE is an optimisation fence: LIMIT
    // applies before the UPDATE touches rows; row_number may not share a SELECT
    // with FOR UPDATE, so the pairing with the owners happens in the next CTE.
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
    std::vector<CrawlClaim> out;
    for (const auto& row : r) {
        out.push_back(CrawlClaim{row[0].as<std::string>(), row[1].as<std::string>()});
    }
    return out;
}

void release_crawl_of_exited(pqxx::connection& conn, const std::string& crawl_id, const std::string& owner,
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

bool pause_refused_crawl(pqxx::work& tx, const std::string& crawl_id, const std::optional<std::string>& lease_holder,
                         const std::optional<std::string>& cookie)
{
    return !tx.exec_params(fmt::format("UPDATE crawl SET status = 'paused', paused_at = now(), lease_owner = NULL, "
                                       " lease_expires_at = NULL, modified_at = now() "
                                       "WHERE id = $1 AND status IN ('queued', 'started') "
                                       "  AND (lease_owner IS NULL OR lease_expires_at < now() OR {}) "
                                       "RETURNING 1",
                                       k_held_for_us),
                           crawl_id, lease_holder, cookie)
                .empty();
}

void release_unstarted_crawl(pqxx::work& tx, const std::string& crawl_id,
                             const std::optional<std::string>& lease_holder, const std::optional<std::string>& cookie)
{
    tx.exec_params0(fmt::format("UPDATE crawl SET lease_owner = NULL, lease_expires_at = NULL, modified_at = now() "
                                "WHERE id = $1 AND {}",
                                k_held_for_us),
                    crawl_id, lease_holder, cookie);
}

ChangeStatement crawl_seal(const std::string& name, const std::string& leading_ctes)
{
    // The outcome and the journal's counts are read by the statement itself. A
    // partial snapshot archived something: the crawl failed only if none of its
    // snapshots succeeded or was partial. Every snapshot is sealed by now, by its
    // worker or by seal_unsealed_snapshots.
    ChangeStatement statement;
    statement.name = name;
    statement.ctes = leading_ctes +
                     "counts AS (SELECT count(*) FILTER (WHERE outcome = 'succeeded') AS ok, "
                     "  count(*) FILTER (WHERE outcome = 'partial') AS partial, count(*) AS total "
                     "  FROM snapshot WHERE crawl_id = $1), ";
    statement.change =
        "UPDATE crawl SET status = 'sealed', "
        " outcome = coalesce($3, CASE WHEN counts.ok = counts.total THEN 'succeeded' "
        "                             WHEN counts.ok + counts.partial = 0 THEN 'failed' ELSE 'partial' END), "
        " seal_reason = $4, sealed_at = clock_timestamp(), sealed_by = $2, retry_at = NULL, lease_owner = NULL, "
        " lease_expires_at = NULL, modified_at = now() "
        "FROM counts WHERE id = $1 AND lease_owner = $2 "
        "RETURNING crawl.outcome, counts.ok, counts.partial, counts.total";
    statement.message = "'crawl sealed ' || change.outcome || coalesce(': ' || $4, '')";
    statement.detail = "jsonb_build_object('outcome', change.outcome, 'snapshots', change.total, "
                       "'succeeded', change.ok, 'partial', change.partial)";
    statement.returning = "detail->>'outcome'";
    return statement;
}

} // namespace orch::work_states
