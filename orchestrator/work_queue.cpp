#include "orchestrator/work_queue.hpp"

#include "common/db/array_parameter.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/random_id.hpp"
#include "common/work/work_states.hpp"

namespace orch {

std::vector<ClaimedCrawl> claim_due_crawls(pqxx::connection& conn, std::size_t limit, std::chrono::seconds ttl,
                                           const std::vector<std::string>& live_owners)
{
    // The worker row ids are made here, fresh for each call: when the connection
    // breaks after the claim committed, the retry finds the crawls leased to them
    // (work_states::claim_due_crawls) instead of leaving them booked for workers
    // that never start until their leases expire.
    std::vector<std::string> owners;
    for (std::size_t i = 0; i < limit; ++i) {
        owners.push_back(random_uuid());
    }
    std::vector<ClaimedCrawl> out;
    for (auto& claim : work_states::claim_due_crawls(conn, owners, ttl, live_owners)) {
        out.push_back(ClaimedCrawl{std::move(claim.crawl_id), std::move(claim.owner)});
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
    work_states::release_crawl_of_exited(conn, crawl_id, owner, backoff);
}

LeaseRecovery release_dead_leases(pqxx::connection& conn)
{
    return ride_out_transaction(conn, [&](pqxx::work& tx) -> LeaseRecovery {
        // Each statement starts from the leased rows ("lease_owner IS NOT NULL" picks the
        // partial indexes of migration 0006): a handful, however long the history.
        // The results first: they are found through the dead leases freed next.
        LeaseRecovery out;
        tx.exec0("UPDATE archive_result ar SET status = 'queued', error = 'interrupted: its worker died', "
                 " modified_at = now() FROM snapshot s JOIN process p ON p.id = s.lease_owner "
                 "WHERE s.lease_owner IS NOT NULL AND ar.snapshot_id = s.id AND ar.status = 'started' "
                 " AND p.status = 'exited' AND s.status <> 'sealed'");
        out.snapshots = work_states::free_exited_leases(tx, LeaseTable::snapshot);
        out.crawls = work_states::free_exited_leases(tx, LeaseTable::crawl);
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
