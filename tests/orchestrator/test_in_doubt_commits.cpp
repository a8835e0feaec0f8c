// Commits in doubt: a crawl runs with every connection of the orchestrator and
// its workers through a ReplyDroppingProxy, which loses the reply to one chosen
// commit after the server made it, as a server dying between a commit and its
// reply would. The client reconnects and runs its work again (ride_out,
// common/database_outage.hpp), on rows that already hold what it wrote. One crawl
// per write the processes make, each with another one lost: every crawl must
// end as if nothing happened (sealed, succeeded, each hook run once, every
// process row closed, every process exiting 0).
#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/reply_dropping_proxy.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>

using namespace orch::test;

namespace {

constexpr int k_urls = 3;
constexpr int k_hooks = 2;

struct InDoubtRun {
    OrchFixture f;
    ReplyDroppingProxy proxy{f.db.url()};
    int crawls = 0;

    InDoubtRun()
    {
        // Long enough for the deferred writes (a running row, a held result) to be made on their own.
        f.write_logging_hook("slow", "on_Snapshot__10_slow.sh", 0.3);
        f.write_logging_hook("fast", "on_Snapshot__20_fast.sh", 0, ":\n");
    }

    // One crawl of k_urls URLs by a one-shot orchestrator connected through the
    // proxy; `arm` arms it once the crawl is added. Checks how the crawl ended.
    void crawl(const std::string& what, const std::function<void()>& arm)
    {
        INFO(what);
        const auto id = f.add_crawl(OrchFixture::site_urls(k_urls, "http://site.test/" + std::to_string(++crawls) + "/"));
        const int dropped = proxy.dropped();
        arm();
        SpawnedProcess orchestrator({bin_path("orchestrator").string(), "--database-url", proxy.url(), "--data-dir",
                                     f.data.string(), "--machine-id", "machine-a", "--max-snapshot-workers", "2"},
                                    f.env({{"DB_OUTAGE_GRACE", "30"}}));
        const bool ended = orchestrator.wait_for(std::chrono::seconds(60));
        proxy.disarm();
        INFO(describe(orchestrator));
        REQUIRE(ended);
        CHECK(orchestrator.exit_code() == 0);
        CHECK(proxy.dropped() == dropped + 1);

        const auto crawl = f.quote(id);
        CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + crawl) == "sealed/succeeded");
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + crawl +
                      " AND status = 'sealed' AND outcome = 'succeeded'") == k_urls);
        CHECK(f.count("SELECT count(*) FROM archive_result a JOIN snapshot s ON s.id = a.snapshot_id "
                      "WHERE s.crawl_id = " + crawl + " AND a.status = 'succeeded'") == k_urls * k_hooks);
        CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook' AND crawl_id = " + crawl) ==
              k_urls * k_hooks);
        CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
        CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + crawl +
                      " AND exit_code IS DISTINCT FROM 0") == 0);
        // Each hook ran once on each snapshot.
        std::map<std::pair<std::string, std::string>, int> runs;
        const auto snapshots = f.rows("SELECT id FROM snapshot WHERE crawl_id = " + crawl);
        std::set<std::string> ours;
        for (const auto& row : snapshots) {
            ours.insert(row[0]);
        }
        for (const auto& run : f.hook_runs()) {
            if (ours.count(run.snapshot) != 0) {
                ++runs[{run.snapshot, run.hook}];
            }
        }
        CHECK(runs.size() == static_cast<std::size_t>(k_urls * k_hooks));
        for (const auto& [key, n] : runs) {
            INFO(key.first << " " << key.second);
            CHECK(n == 1);
        }
    }
};

} // namespace

TEST_CASE("a commit whose reply is lost - each write of a crawl in turn - the crawl ends as if nothing happened",
          "[in_doubt]")
{
    InDoubtRun run;
    // A crawl with nothing lost first: which statements and how many COMMITs a crawl sends.
    const auto before = run.proxy.commits();
    const auto id = run.f.add_crawl(OrchFixture::site_urls(k_urls, "http://site.test/0/"));
    SpawnedProcess clean({bin_path("orchestrator").string(), "--database-url", run.proxy.url(), "--data-dir",
                          run.f.data.string(), "--machine-id", "machine-a", "--max-snapshot-workers", "2"},
                         run.f.env());
    REQUIRE(clean.wait_for(std::chrono::seconds(60)));
    REQUIRE(clean.exit_code() == 0);
    REQUIRE(run.f.scalar("SELECT outcome FROM crawl WHERE id = " + run.f.quote(id)) == "succeeded");
    const auto statements = run.proxy.statements();
    const auto commits = run.proxy.commits() - before;
    MEASURE("in-doubt sweep: " << statements.size() << " prepared statements and " << commits
                               << " COMMITs in a crawl of " << k_urls << " URLs");
    REQUIRE(statements.size() >= 10);

    for (const auto& statement : statements) {
        run.crawl("statement " + statement, [&] { run.proxy.arm_statement(statement); });
    }
    for (int nth = 1; nth <= commits; ++nth) {
        run.crawl("COMMIT " + std::to_string(nth), [&] { run.proxy.arm_commit(nth); });
    }
}
