#include "common/work/work_states.hpp"

#include "common/db/autocommit_statement.hpp"

#include <fmt/format.h>

// work_states: the snapshot claim and seal statements, and the one statement
// that seals and claims.
namespace orch::work_states {
namespace {

// A candidate's host is below the crawl's max_per_host: its started, leased
// snapshots of the same host, except the candidate itself, the claiming owners'
// own, and, when expired leases may be taken over ($6), those whose lease expired
// under an owner not known to run ($5): they are candidates, not running, and
// counting them would keep a host at its limit for good once its workers died.
// Evaluated only for a crawl that has a limit; the crawl's running snapshots are
// found by snapshot_leased_idx (migrations/0006).
constexpr const char* k_host_gate =
    " AND (SELECT count(*) FROM snapshot o"
    "      WHERE o.lease_owner IS NOT NULL AND o.crawl_id = $1 AND o.status = 'started' AND o.id <> s.id"
    "        AND NOT (o.lease_owner = ANY($3::uuid[])) AND url_host(o.url) = url_host(s.url)"
    "        AND (NOT $6 OR o.lease_expires_at >= now() OR o.lease_owner = ANY($5::uuid[])))"
    "     < (SELECT coalesce(c.max_per_host, nullif(current_setting('orch.default_max_per_host', true), '0')::int,"
    "                        2147483647) FROM crawl c WHERE c.id = $1) "
    // ... and its host's last claim is at least host_delay_s old. The wall clock,
    // not now(): the transaction began before it waited for the claim lock.
    " AND NOT EXISTS (SELECT 1 FROM crawl_host_claim h"
    "                 WHERE h.crawl_id = $1 AND h.host = url_host(s.url)"
    "                   AND h.last_claimed_at > clock_timestamp()"
    "                       - make_interval(secs => (SELECT coalesce(c.host_delay_s,"
    "                           nullif(current_setting('orch.default_host_delay_ms', true), '0')::float8 / 1000, 0)"
    "                         FROM crawl c WHERE c.id = $1))) ";
// Notes the claim time of each claimed snapshot's host (a CTE of the same statement).
constexpr const char* k_host_stamp =
    ", host_claimed AS (INSERT INTO crawl_host_claim (crawl_id, host, last_claimed_at)"
    "   SELECT DISTINCT $1::uuid, url_host(c.url), clock_timestamp() FROM claimed c"
    "   ON CONFLICT (crawl_id, host) DO UPDATE SET last_claimed_at = EXCLUDED.last_claimed_at)";

} // namespace

std::string claim_statement(const std::string& leading_ctes, const std::string& gate, const std::string& select,
                            const std::string& limit, const std::string& self, bool host_limited,
                            bool fresh_after_first)
{
    // The CTE with FOR UPDATE SKIP LOCKED picks the rows (index snapshot_claim_idx,
    // migrations/0003); the crawl fence row is locked FOR SHARE: a concurrent lease
    // change or cancel request waits for our commit. The async-commit setting joins
    // the UPDATE's FROM list (autocommit_statement.hpp).
    // A join with `claimed` (estimated at one row) lets a plan made while the
    // process table was young and cached on the connection scan the whole table
    // for the one row; a key parameter is always an index probe.
    const std::string pointed_row =
        self.empty() ? "p.id = c.lease_owner" : fmt::format("p.id = {}::uuid AND c.lease_owner = p.id", self);
    // row_number() may not share a SELECT with FOR UPDATE: the pairing with the
    // owners, and the batch's rule, are applied to the numbered rows.
    const std::string numbered =
        fresh_after_first ? "numbered AS (SELECT id, n FROM (SELECT id, attempts, row_number() OVER () AS n "
                            "  FROM picked) r WHERE n = 1 OR attempts = 0), "
                          : "numbered AS (SELECT id, row_number() OVER () AS n FROM picked), ";
    const std::string pointed_from =
        fresh_after_first ? "(SELECT id, lease_owner FROM claimed ORDER BY n LIMIT 1) c" : "claimed c";
    return fmt::format(
        "WITH {}picked AS ("
        "  SELECT s.id, s.attempts FROM snapshot s "
        "  WHERE s.crawl_id = $1 AND s.status IN ('queued', 'started') "
        "    AND (s.lease_owner IS NULL "
        "         OR ($6 AND s.lease_expires_at < now() AND NOT (s.lease_owner = ANY($5::uuid[])))) "
        "    AND coalesce(s.retry_at, now()) <= now() {} "
        "    AND EXISTS (SELECT 1 FROM crawl c WHERE c.id = $1 AND c.lease_owner = $2 "
        "                AND c.status IN ('queued', 'started') AND c.cancel_requested_at IS NULL FOR SHARE) "
        "  ORDER BY s.depth, s.retry_at, s.created_at "
        "  LIMIT {} FOR UPDATE OF s SKIP LOCKED), "
        "{}"
        "owners AS (SELECT o, n FROM unnest($3::uuid[]) WITH ORDINALITY AS t(o, n)), "
        "claimed AS ("
        "  UPDATE snapshot s SET lease_owner = owners.o, lease_expires_at = now() + make_interval(secs => $4), "
        "    status = CASE WHEN s.status = 'queued' THEN 'started' ELSE s.status END, "
        // The wall clock, not now(): a host-limited claim's transaction may have waited
        // for the crawl's claim lock, and its start is when it got it (as the host's
        // last claim is stamped), not when the transaction began.
        "    started_at = coalesce(s.started_at, clock_timestamp()), attempts = s.attempts + 1, modified_at = now() "
        "  FROM numbered JOIN owners ON owners.n = numbered.n, {} "
        "  WHERE s.id = numbered.id "
        "  RETURNING s.id, s.lease_owner, s.attempts, numbered.n, s.url, s.depth), "
        // An owner row that exists already (a worker claiming for itself) now names the
        // snapshot it works on; rows created later get it at their creation. The row
        // is found by its key: written `status <> 'exited'`, the condition matched the
        // predicate of process_live_idx, and the planner, which counts only live rows
        // in that index, scanned it whole instead, through the entries every hook that
        // exited since the last vacuum left behind (hundreds of buffer reads per
        // claim in a busy crawl). `IS TRUE` keeps the meaning and not the match.
        "pointed AS (UPDATE process p SET snapshot_id = c.id, heartbeat_at = now() FROM {} "
        "            WHERE {} AND (p.status <> 'exited') IS TRUE)"
        "{}",
        leading_ctes, host_limited ? gate + k_host_gate : gate, limit, numbered, k_async_commit, pointed_from,
        pointed_row,
        host_limited ? k_host_stamp + select : select);
}

std::string seal_snapshot_ctes(const SnapshotSeal& seal, const std::string& owner)
{
    // The async-commit setting sits in the sealing UPDATE, which always runs.
    return fmt::format(
        "{2}"
        "sealed{5} AS (UPDATE snapshot s SET status = 'sealed', "
        "  outcome = CASE WHEN counts.failed = 0 THEN 'succeeded' "
        "                 WHEN counts.failed = counts.total THEN 'failed' ELSE 'partial' END, "
        "  error = CASE WHEN counts.failed > 0 "
        "               THEN format('%s of %s hooks failed', counts.failed, counts.total) END, "
        "  sealed_at = clock_timestamp(), sealed_by = {1}, retry_at = NULL, lease_owner = NULL, "
        "  lease_expires_at = NULL, modified_at = now() "
        "  FROM counts{5} AS counts, {6} WHERE s.id = {0} AND (s.lease_owner = {1}) IS TRUE{3} RETURNING s.outcome){4}",
        seal.snapshot, owner, seal.before, seal.condition, seal.after, seal.suffix, k_async_commit);
}

std::string seal_and_claim_statement(const SealAndClaim& statement)
{
    // The claim picks rows only once every seal happened (its gate): a lease
    // found gone stops the whole step, and the statement returns no row.
    std::string ctes = statement.leading_ctes;
    std::string gate;
    for (const auto& seal : statement.seals) {
        ctes += seal_snapshot_ctes(seal, statement.owner) + ", ";
        gate += (gate.empty() ? "" : " ") + std::string("AND EXISTS (SELECT 1 FROM sealed") + seal.suffix + ")";
    }
    return claim_statement(ctes, gate, statement.select, statement.limit, statement.owner, statement.host_limited,
                           statement.fresh_after_first);
}

} // namespace orch::work_states
