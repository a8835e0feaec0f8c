#include "snapshot_worker/snapshot_store.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/work/work_states.hpp"
#include "snapshot_worker/seal_statements.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

// SnapshotStore::seal_batch_and_claim: a batch of a continuing worker's
// snapshots sealed, and its next batch claimed, in one statement.
namespace orch {
namespace {

// The statement for `held` snapshots sealed besides the caller's, `exits` held
// exits (their variant) and `claim` snapshots to claim. Parameters: $1-$6 the
// claim's (claim_parameters), $7 this snapshot, $8 the owner, $9 its held
// writes, $10 the hooks, the exits' from $11, then each held snapshot and its
// writes. One row per claimed snapshot (one with NULLs for none): the seals'
// outcomes (this snapshot's, then the held ones'), its claim columns and its
// results; no row when a seal found its lease gone.
std::string batch_statement(std::size_t held, std::size_t exits, int claim)
{
    int next = 11 + static_cast<int>(process_table::exits_parameter_count(exits));
    work_states::SealAndClaim statement;
    statement.leading_ctes = process_table::exits_ctes(exits, 11);
    statement.seals.push_back(seal_sql::result_seal("$7", "$9", false, "_0"));
    statement.owner = "$8";
    std::string sealed = "sealed_0";
    std::string outcomes = "sealed_0.outcome";
    for (std::size_t i = 1; i <= held; ++i) {
        const auto suffix = "_" + std::to_string(i);
        statement.seals.push_back(
            seal_sql::result_seal(fmt::format("${}", next), fmt::format("${}", next + 1), false, suffix));
        next += 2;
        sealed += ", sealed" + suffix;
        outcomes += ", sealed" + suffix + ".outcome";
    }
    // Each claimed snapshot's results: those the statement made (RETURNING) and
    // those it had already (a snapshot claimed again), as of the statement's start.
    statement.select =
        ", prepared AS (" + seal_sql::create_results("c.id", "claimed c, ", "$10", "") +
        ") SELECT " + outcomes + ", claimed.*, "
        "  (SELECT jsonb_object_agg(r.hook_name, jsonb_build_array(r.id, r.status))::text "
        "   FROM (SELECT hook_name, id, status FROM prepared WHERE prepared.snapshot_id = claimed.id "
        "         UNION ALL SELECT a.hook_name, a.id, a.status FROM archive_result a "
        "         WHERE a.snapshot_id = claimed.id) r) "
        "FROM " + sealed + " LEFT JOIN claimed ON true ORDER BY claimed.n";
    statement.limit = std::to_string(claim);
    statement.fresh_after_first = true;
    return work_states::seal_and_claim_statement(statement);
}

const std::string& cached_batch_statement(std::size_t held, std::size_t exits, int claim)
{
    static std::map<std::tuple<std::size_t, std::size_t, int>, std::string> statements;
    const auto key = std::make_tuple(held, process_table::exits_variant(exits), claim);
    auto it = statements.find(key);
    if (it == statements.end()) {
        it = statements.emplace(key, batch_statement(held, exits, claim)).first;
    }
    return it->second;
}

} // namespace

SnapshotStore::BatchStep SnapshotStore::seal_batch_and_claim(const std::vector<SnapshotStore*>& held,
                                                             const std::string& crawl_owner, std::chrono::seconds ttl,
                                                             const std::vector<process_table::HeldExit>& exits,
                                                             const std::vector<Hook>& hooks, int claim)
{
    ClaimScope free_only;
    free_only.take_expired = false;
    const auto p = claim_parameters(m_crawl_id, crawl_owner, std::vector<std::string>(static_cast<std::size_t>(claim), m_owner),
                                    ttl, free_only);
    auto params = seal_sql::seal_parameters(
        {p[0], p[1], p[2], p[3], p[4], p[5], m_snapshot_id, m_owner, held_results(), seal_sql::hooks_json(hooks)}, exits);
    for (auto* store : held) {
        params.push_back(store->m_snapshot_id);
        params.push_back(store->held_results());
    }
    auto r = exec_claim(m_conn,
                        fmt::format("snapshot_store.seal_batch_and_claim.{}.h{}.c{}",
                                    process_table::exits_variant_name(exits.size()), held.size(), claim),
                        cached_batch_statement(held.size(), exits.size(), claim), params, m_crawl_id, false);
    BatchStep out;
    auto first = static_cast<pqxx::row::size_type>(held.size() + 1);
    if (!r.empty()) {
        for (pqxx::row::size_type i = 0; i < first; ++i) {
            out.outcomes.push_back(r[0][i].as<std::string>());
        }
    } else {
        // A seal found its lease gone. As in seal_and_claim_next: if the statement
        // committed on an earlier try whose reply was lost, every seal is ours and
        // so is the claim; read them back.
        out.outcomes.push_back(sealed_already());
        for (auto* store : held) {
            out.outcomes.push_back(store->sealed_already());
        }
        first = 0;
        r = exec_autocommit(
            m_conn, "snapshot_store.batch_claimed_already",
            "SELECT s.id, s.lease_owner, s.attempts, row_number() OVER (ORDER BY s.depth, s.retry_at, s.created_at), "
            "  s.url, s.depth, "
            "  (SELECT jsonb_object_agg(a.hook_name, jsonb_build_array(a.id, a.status))::text "
            "   FROM archive_result a WHERE a.snapshot_id = s.id) "
            "FROM snapshot s WHERE s.crawl_id = $1 AND (s.lease_owner = $2) IS TRUE AND s.status <> 'sealed' "
            "ORDER BY 4",
            m_crawl_id, m_owner);
    }
    write_index();
    for (auto* store : held) {
        store->write_index();
    }
    for (const auto& row : r) {
        if (row[first].is_null()) {
            continue; // the row of a batch that claimed nothing
        }
        out.next.emplace_back(claimed_snapshot(row, first), seal_sql::results_of(row[first + 6]));
    }
    return out;
}

} // namespace orch
