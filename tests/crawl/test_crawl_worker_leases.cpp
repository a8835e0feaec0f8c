// crawl_worker and the crawl lease: one worker per crawl, renewal across a
// long run, and stopping when the lease is taken away.

#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("crawl_worker: a second worker for a crawl that is running exits 8 and changes nothing",
          "[crawl_worker][lease]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    auto go = f.root / "go";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", gated_hook(started, go));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto first = f.start(id);
    REQUIRE(poll_until([&] { return read_lines(started).size() == 2; }, 30s));
    auto owner = f.scalar("SELECT lease_owner FROM crawl WHERE id = " + f.quote(id));
    REQUIRE(!owner.empty());
    // Claimed in one batch for the workers' rows, adopted by the workers: one attempt each.
    CHECK(f.count("SELECT count(*) FROM snapshot s JOIN process p ON p.id = s.lease_owner "
                  "WHERE p.snapshot_id = s.id AND p.worker_type = 'snapshot' AND p.parent_id = " + f.quote(owner) +
                  " AND s.attempts = 1 AND s.status = 'started'") == 2);

    auto second = f.run(id, {}, 30s);
    INFO(second->output());
    CHECK(second->exit_code() == 8);
    CHECK(f.scalar("SELECT lease_owner FROM crawl WHERE id = " + f.quote(id)) == owner);
    CHECK(read_lines(started).size() == 2);

    std::ofstream(go) << "1";
    REQUIRE(first->wait_for(60s));
    INFO(first->output());
    CHECK(first->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: the crawl lease is renewed through a run longer than its TTL", "[crawl_worker][lease]")
{
    CrawlFixture f;
    f.write_hook("slow", "on_Snapshot__10_slow.sh", "sleep 2.5\n" + succeeded_record("done"));
    auto id = f.add_crawl(CrawlFixture::site_urls(4));
    auto p = f.run(id, {{"LEASE_TTL", "2"}, {"MAX_SNAPSHOT_WORKERS", "2"}}, 60s);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(id)) == "sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded' AND attempts = 1") == 4);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: a lost crawl lease stops the worker with 8 - its workers and hooks with it",
          "[crawl_worker][lease]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", slow_hook(started, terms) + succeeded_record("late"));
    auto id = f.add_crawl(CrawlFixture::site_urls(4));
    auto q = f.quote(id);
    auto p = f.start(id, {{"LEASE_TTL", "3"}, {"MAX_SNAPSHOT_WORKERS", "2"}});
    REQUIRE(poll_until([&] { return read_lines(started).size() == 2; }, 30s));

    // Another process takes the crawl over (as if our lease had expired).
    auto thief = "00000000-0000-4000-8000-0000000000aa";
    f.exec(std::string("UPDATE crawl SET lease_owner = '") + thief +
           "', lease_expires_at = now() + interval '1 hour' WHERE id = " + q);
    auto t0 = Clock::now();
    REQUIRE(p->wait_for(30s));
    INFO(p->output());
    CHECK(p->exit_code() == 8);
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 15.0);
    // Nothing written after the lease was lost: not sealed, still the thief's.
    CHECK(f.rows("SELECT status, lease_owner FROM crawl WHERE id = " + q) ==
          std::vector<std::vector<std::string>>{{"started", thief}});
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed'") == 0);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'started'") == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: an internal failure mid-crawl closes its row and releases the crawl", "[crawl_worker][lease]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    f.write_hook("browser", "on_Crawl__10_browser.bg.sh", "sleep 300 &\nwait\n");
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    // A crawl_worker without a snapshot_worker next to it cannot start its workers.
    auto lonely = f.root / "bin" / "crawl_worker";
    std::filesystem::create_directories(lonely.parent_path());
    std::filesystem::copy_file(bin_path("crawl_worker"), lonely);
    auto argv = f.argv(id);
    argv[0] = lonely.string();
    // ORCH_BIN_DIR (set by ctest) would name the real one: point it at the lonely dir.
    CrawlWorkerProcess p(argv, f.env({{"ORCH_BIN_DIR", lonely.parent_path().string()}}), f.root / "lonely.log");
    REQUIRE(p.wait_for(30s));
    INFO(p.output());
    CHECK(p.exit_code() == 1);
    CHECK_THAT(p.output(), Catch::Contains("snapshot_worker"));
    CHECK(f.rows("SELECT status, lease_owner FROM crawl WHERE id = " + f.quote(id)) ==
          std::vector<std::vector<std::string>>{{"started", ""}});
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: a snapshot worker launch that throws gives back every claim of its batch",
          "[crawl_worker][lease]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    const auto q = f.quote(id);
    // The workers' log directory cannot be made (a file has its name): the launch
    // throws after the batch of three snapshots was claimed, before any worker runs.
    auto blocker = f.data / "crawls" / id / "snapshot_workers";
    std::filesystem::create_directories(blocker.parent_path());
    std::ofstream(blocker) << "not a directory";
    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 1);
    CHECK_THAT(p->output(), Catch::Contains("snapshot_workers"));
    CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'") == 0);
    // Free and due now, their attempts undone: not leased to rows that never ran.
    CHECK(f.rows("SELECT count(*), count(*) FILTER (WHERE lease_owner IS NULL AND attempts = 0 AND retry_at <= now() "
                 "  AND status <> 'sealed') FROM snapshot WHERE crawl_id = " + q) ==
          std::vector<std::vector<std::string>>{{"3", "3"}});
    CHECK(f.rows("SELECT status, lease_owner FROM crawl WHERE id = " + q) ==
          std::vector<std::vector<std::string>>{{"started", ""}});

    // Once the directory can be made the next run takes them at once.
    std::filesystem::remove(blocker);
    auto again = f.run(id);
    INFO(again->output());
    CHECK(again->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND attempts = 1") == 3);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}
