#include "common/work/snapshot_claims.hpp"

#include "common/db/array_parameter.hpp"
#include "common/db/autocommit_statement.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

const std::string k_claim_select = " SELECT id, lease_owner, attempts, n, url, depth FROM claimed";
const std::string k_claim_sql = work_states::claim_statement("", "", k_claim_select, "cardinality($3::uuid[])");
const std::string k_host_limited_claim_sql = work_states::claim_statement("", "", k_claim_select, "1", "", true);

} // namespace

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

} // namespace orch
