// Recovery's lease queries against a long history: they must start from the few
// leased rows (migration 0006's partial indexes), never read the sealed history.
// The plan is checked through the table statistics: no sequential scan of snapshot
// or crawl, and the partial indexes used, on a database whose statistics know it
// holds many sealed rows.

#include "orchestrator/work_queue.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using namespace orch::test;

namespace {

constexpr int k_history = 20000;

} // namespace

TEST_CASE("lease recovery reads the leased rows only - not the sealed history", "[orchestrator][recovery][scale]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    std::string dead, stalled, healthy;
    {
        pqxx::work tx(*conn);
        tx.exec0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m1', 'h', 'b', 1)");
        const auto old = tx.exec1("INSERT INTO crawl (urls, status, outcome, retry_at, started_at, sealed_at) "
                                  "VALUES ('{https://example.com/}', 'sealed', 'succeeded', NULL, now(), now()) "
                                  "RETURNING id")[0].as<std::string>();
        tx.exec_params0("INSERT INTO snapshot (crawl_id, url, status, outcome, retry_at, sealed_at) "
                        "SELECT $1, 'https://example.com/' || g, 'sealed', 'succeeded', NULL, now() "
                        "FROM generate_series(1, $2) g",
                        old, k_history);
        tx.exec_params0("INSERT INTO crawl (urls, status, outcome, retry_at, started_at, sealed_at) "
                        "SELECT '{https://example.com/}', 'sealed', 'succeeded', NULL, now(), now() "
                        "FROM generate_series(1, $1)",
                        k_history);
        tx.exec_params0("INSERT INTO process (machine_id, process_type, status, pid, exit_code, end_reason, "
                        " started_at, ended_at) "
                        "SELECT 'm1', 'hook', 'exited', 1 + g, 0, 'exited', now(), now() FROM generate_series(1, $1) g",
                        k_history);
        auto worker = [&](const std::string& status) {
            return tx.exec_params1("INSERT INTO process (machine_id, process_type, worker_type, status, pid, "
                                   " started_at, ended_at, exit_code) "
                                   "VALUES ('m1', 'worker', 'snapshot', $1, 4242, now(), "
                                   " CASE WHEN $1 = 'exited' THEN now() END, CASE WHEN $1 = 'exited' THEN 1 END) "
                                   "RETURNING id",
                                   status)[0].as<std::string>();
        };
        dead = worker("exited");
        stalled = worker("running");
        healthy = worker("running");
        const auto live = tx.exec1("INSERT INTO crawl (urls, status, started_at) "
                                   "VALUES ('{https://example.org/}', 'started', now()) RETURNING id")[0].as<std::string>();
        auto leased = [&](const std::string& url, const std::string& owner, const std::string& expires) {
            tx.exec_params0("INSERT INTO snapshot (crawl_id, url, status, lease_owner, lease_expires_at) "
                            "VALUES ($1, $2, 'started', $3, now() + $4::interval)",
                            live, url, owner, expires);
        };
        leased("https://example.org/dead", dead, "1 hour");
        leased("https://example.org/stalled", stalled, "-1 minute");
        leased("https://example.org/healthy", healthy, "1 hour");
        tx.commit();
    }
    pqxx::nontransaction(*conn).exec0("ANALYZE");
    const auto snapshot_seq = seq_scans(*conn, "snapshot");
    const auto crawl_seq = seq_scans(*conn, "crawl");
    const auto leased_idx = index_scans(*conn, "snapshot_leased_idx");

    CHECK(stalled_lease_owners(*conn, "m1") == std::vector<std::string>{stalled});
    const auto freed = release_dead_leases(*conn);
    CHECK(freed.snapshots == 1);
    CHECK(freed.crawls == 0);
    CHECK(pqxx::nontransaction(*conn)
              .exec1("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL")[0]
              .as<int>() == 2);

    CHECK(seq_scans(*conn, "snapshot") == snapshot_seq);
    CHECK(seq_scans(*conn, "crawl") == crawl_seq);
    CHECK(index_scans(*conn, "snapshot_leased_idx") > leased_idx);
}
