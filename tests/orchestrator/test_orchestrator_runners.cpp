// Several orchestrators: the single-runner gate and --takeover on one machine,
// two machines sharing one database. Real PostgreSQL and executables.

#include "tests/orchestrator/orch_fixture.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <map>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// No crawl, snapshot or hook run twice at once; every process row closed.
void check_no_double_runs(OrchFixture& f)
{
    CHECK(overlapping_process_rows(f, "worker_type = 'crawl'", "crawl_id") == 0);
    CHECK(overlapping_process_rows(f, "worker_type = 'snapshot'", "snapshot_id") == 0);
    CHECK(overlapping_process_rows(f, "process_type = 'hook'", "snapshot_id::text || hook_name") == 0);
    CHECK(overlapping_hook_runs(f.hook_runs()) == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
}

// Every crawl sealed succeeded by exactly one crawl_worker run that exited 0; every
// hook of every snapshot succeeded and completed exactly once (runs that were
// interrupted before their end do not count).
void check_all_done_once(OrchFixture& f, long crawls, long snapshots)
{
    CHECK(f.count("SELECT count(*) FROM crawl WHERE status = 'sealed' AND outcome = 'succeeded' "
                  "AND lease_owner IS NULL") == crawls);
    CHECK(f.count("SELECT count(*) FROM crawl c WHERE (SELECT count(*) FROM process p WHERE p.crawl_id = c.id "
                  "AND p.worker_type = 'crawl' AND p.exit_code = 0) = 1") == crawls);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND outcome = 'succeeded'") == snapshots);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == snapshots);
    std::map<std::string, int> completed;
    for (const auto& run : f.hook_runs()) {
        if (run.end) {
            ++completed[run.snapshot + " " + run.hook];
        }
    }
    CHECK(completed.size() == static_cast<std::size_t>(snapshots));
    for (const auto& [key, n] : completed) {
        INFO(key);
        CHECK(n == 1);
    }
}

} // namespace

TEST_CASE("orchestrator: one runner per machine and data directory and --takeover hands over without losing work",
          "[orchestrator][runners]")
{
    OrchFixture f;
    f.write_logging_hook("work", "on_Snapshot__10_work.sh", 0.4);
    for (int i = 1; i <= 4; ++i) {
        f.add_crawl(OrchFixture::site_urls(3, "http://before" + std::to_string(i) + ".test/"));
    }
    const std::vector<std::string> opts = {"--daemon", "--max-crawl-workers", "2", "--max-snapshot-workers", "2"};

    // Two at the same instant: exactly one runs, the other exits 9 naming it.
    auto a = f.start(opts);
    auto b = f.start(opts);
    REQUIRE(eventually([&] { return a->wait_for(0ms) || b->wait_for(0ms); }, 30s));
    auto& loser = a->exited() ? a : b;
    auto& winner = a->exited() ? b : a;
    {
        INFO(describe(*loser));
        CHECK(loser->exit_code() == 9);
        CHECK_THAT(loser->err(), Catch::Contains("orchestrator pid " + std::to_string(winner->pid())) &&
                                     Catch::Contains("already runs") && Catch::Contains("--takeover"));
    }
    REQUIRE(f.wait_registered(winner->pid()));
    CHECK_FALSE(winner->wait_for(0ms));
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'orchestrator' AND status = 'running'") == 1);

    // Take over while crawls run; add more during the handover.
    REQUIRE(eventually(
        [&] { return f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") >= 2; }, 60s));
    auto c = f.start({"--daemon", "--takeover", "--max-crawl-workers", "2", "--max-snapshot-workers", "2"});
    for (int i = 1; i <= 3; ++i) {
        f.add_crawl(OrchFixture::site_urls(3, "http://during" + std::to_string(i) + ".test/"));
    }
    auto t0 = Clock::now();
    bool handed_over = winner->wait_for(60s);
    INFO("first: " << describe(*winner));
    INFO("takeover: " << describe(*c));
    REQUIRE(handed_over);
    CHECK(winner->exit_code() == 0);
    REQUIRE(f.wait_registered(c->pid()));
    MEASURE("takeover: the running orchestrator stopped in "
         << std::chrono::duration<double>(Clock::now() - t0).count() << " s");
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND status = 'running' AND parent_id = "
                  "(SELECT id FROM process WHERE pid = " + std::to_string(winner->pid()) +
                  " AND process_type = 'orchestrator')") == 0);

    REQUIRE(eventually([&] { return f.count("SELECT count(*) FROM crawl WHERE status = 'sealed'") == 7; }, 90s));
    c->signal(SIGTERM);
    REQUIRE(c->wait_for(30s));
    CHECK(c->exit_code() == 0);
    CHECK(f.count("SELECT count(DISTINCT parent_id) FROM process WHERE worker_type = 'crawl'") == 2);
    // The journal names the handover: the newcomer's start says whom it replaced.
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'orchestrator.started' "
                  "AND detail ? 'took_over_from' AND message LIKE '%taking over from%'") == 1);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'orchestrator.stopped' AND (detail->>'exit_code')::int = 0") ==
          2);
    check_all_done_once(f, 7, 21);
    check_no_double_runs(f);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: two machines on one database share 50 crawls - each sealed once - nothing run twice at once",
          "[orchestrator][runners]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0.05);
    f.exec("INSERT INTO crawl (urls) SELECT ARRAY['http://m' || g || '.test/'] FROM generate_series(1, 50) g");

    auto t0 = Clock::now();
    auto a = f.start({"--max-crawl-workers", "4"}, "machine-a", f.root / "data-a");
    auto b = f.start({"--max-crawl-workers", "4"}, "machine-b", f.root / "data-b");
    bool done = a->wait_for(180s) && b->wait_for(60s);
    INFO("a: " << describe(*a));
    INFO("b: " << describe(*b));
    REQUIRE(done);
    CHECK(a->exit_code() == 0);
    CHECK(b->exit_code() == 0);
    auto share = f.rows("SELECT machine_id, count(*) FROM process WHERE worker_type = 'crawl' GROUP BY machine_id "
                        "ORDER BY machine_id");
    MEASURE("50 crawls on two machines in " << std::chrono::duration<double>(Clock::now() - t0).count() << " s; "
         << "crawl workers: " << (share.size() > 0 ? share[0][0] + " " + share[0][1] : "")
         << (share.size() > 1 ? ", " + share[1][0] + " " + share[1][1] : ""));
    CHECK(share.size() == 2);
    CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'crawl'") == 50);
    CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'") == 50);
    // A worker's tree stays on its machine.
    CHECK(f.count("SELECT count(*) FROM process c JOIN process p ON p.id = c.parent_id "
                  "WHERE c.machine_id <> p.machine_id") == 0);
    check_all_done_once(f, 50, 50);
    check_no_double_runs(f);
    CHECK(f.hook_runs().size() == 50);
    CHECK(f.wait_no_leftovers().empty());
}
