#include "common/work/snapshot_claims.hpp"

#include "common/db/array_parameter.hpp"
#include "common/db/autocommit_statement.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

// The CTE with FOR UPDATE SKIP LOCKED picks the rows (index snapshot_claim_idx,
// migrations/0003); row_number may not share a SELECT with FOR UPDATE, so the
// pairing with the owners happens in the next CTE. The crawl fence row is locked
// FOR SHARE: a concurrent lease change or cancel request waits for our commit.
// The async-commit setting joins the UPDATE's FROM list (autocommit_statement.hpp).
const std::string k_claim_select = " SELECT id, lease_owner, attempts, n, url, depth FROM claimed";
const std::string k_claim_sql = claim_statement("", "", k_claim_select, "cardinality($3::uuid[])");
const std::string k_host_limited_claim_sql = claim_statement("", "", k_claim_select, "1", "", true);

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
    // A join with `claimed` (estimated at one row) lets a plan made while the
    // process table was young and cached on the connection scan the whole table
    // for the one row; a key parameter is always an index probe.
    const std::string pointed_row =
        self.empty() ? "p.id = c.lease_owner" : fmt::format("p.id = {}::uuid AND c.lease_owner = p.id", self);
    // row_number() may not share a SELECT with FOR UPDATE: the batch's rule is
    // applied to the numbered rows.
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

pqxx::result exec_claim(pqxx::connection& conn, const std::string& name, const std::string& definition,
                        const std::vector<std::optional<std::string>>& params, const std::string& crawl_id,
                        bool host_limited, const std::function<std::optional<pqxx::result>()>& claimed_before)
{
    const auto earlier = [&]() -> std::optional<pqxx::result> {
        return claimed_before ? claimed_before() : std::nullopt;
    };
    return ride_out_in_doubt(conn, [&]() -> pqxx::result {
        conn.prepare(name, definition);
        if (!host_limited) {
            pqxx::nontransaction tx(conn);
            return exec_prepared_params(tx, name, params);
        }
        pqxx::work tx(conn);
        // Waited for before the claim statement starts: a READ COMMITTED statement
        // reads the rows as of its own start, so a lock taken inside it would not
        // let it see the claim it waited for.
        tx.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "orch.snapshot_claim:" + crawl_id);
        auto r = exec_prepared_params(tx, name, params);
        tx.commit();
        return r;
    }, earlier);
}

std::vector<std::string> claim_parameters(const std::string& crawl_id, const std::string& crawl_owner,
                                          const std::vector<std::string>& owners, std::chrono::seconds ttl,
                                          const ClaimScope& scope)
{
    return {crawl_id, crawl_owner, array_parameter(owners), pqxx::to_string(static_cast<double>(ttl.count())),
            array_parameter(scope.live_owners), scope.take_expired ? "true" : "false"};
}

ClaimedSnapshot claimed_snapshot(const pqxx::row& row, pqxx::row::size_type first)
{
    return ClaimedSnapshot{row[first].as<std::string>(), row[first + 1].as<std::string>(), row[first + 2].as<int>(),
                           row[first + 4].as<std::string>(), row[first + 5].as<int>()};
}

std::vector<ClaimedSnapshot> claim_due_snapshots(pqxx::connection& conn, const std::string& crawl_id,
                                                 const std::string& crawl_owner,
                                                 const std::vector<std::string>& owners, std::chrono::seconds ttl,
                                                 const ClaimScope& scope)
{
    std::vector<ClaimedSnapshot> out;
    if (owners.empty()) {
        return out;
    }
    // Before a try after the first: the connection broke under the previous
    // one, maybe after it committed (its reply lost with the connection). Its
    // claims are then leased to these owners, fresh ids of this call: they are
    // what it claimed, not a second batch that would stay leased to owners
    // nobody runs until the leases expire, each with an attempt counted.
    const auto claimed_before = [&conn, &crawl_id](const std::vector<std::string>& batch) {
        return [&conn, &crawl_id, batch]() -> std::optional<pqxx::result> {
            conn.prepare("snapshot_claims.claimed_before",
                         "SELECT id, lease_owner, attempts, array_position($2::uuid[], lease_owner), url, depth "
                         "FROM snapshot WHERE crawl_id = $1 AND lease_owner = ANY($2::uuid[]) AND status <> 'sealed'");
            pqxx::nontransaction tx(conn);
            auto r = tx.exec_prepared("snapshot_claims.claimed_before", crawl_id, array_parameter(batch));
            return r.empty() ? std::nullopt : std::optional<pqxx::result>(std::move(r));
        };
    };
    if (scope.host_limited) {
        // One per statement: a statement's count of a host's running snapshots
        // does not see what the same statement claims.
        for (const auto& owner : owners) {
            const auto p = claim_parameters(crawl_id, crawl_owner, {owner}, ttl, scope);
            auto r = exec_claim(conn, "snapshot_claims.claim_due.hosts", k_host_limited_claim_sql,
                                {p.begin(), p.end()}, crawl_id, true, claimed_before({owner}));
            if (r.empty()) {
                break;
            }
            out.push_back(claimed_snapshot(r[0], 0));
        }
        return out;
    }
    const auto p = claim_parameters(crawl_id, crawl_owner, owners, ttl, scope);
    auto r = exec_claim(conn, "snapshot_claims.claim_due", k_claim_sql, {p.begin(), p.end()}, crawl_id, false,
                        claimed_before(owners));
    out.resize(r.size());
    for (const auto& row : r) {
        // RETURNING has no order: the owner index restores the claim order.
        out[row[3].as<std::size_t>() - 1] = claimed_snapshot(row, 0);
    }
    return out;
}

bool return_unstarted_claim(pqxx::connection& conn, const ClaimedSnapshot& claim)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params("UPDATE snapshot SET lease_owner = NULL, lease_expires_at = NULL, retry_at = now(), "
                              " attempts = greatest(attempts - 1, 0), modified_at = now() "
                              "WHERE id = $1 AND (lease_owner = $2) IS TRUE AND status <> 'sealed' RETURNING 1",
                              claim.snapshot_id, claim.owner);
    });
    return !r.empty();
}

} // namespace orch
