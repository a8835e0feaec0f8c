// Commits in doubt: a crawl runs with every connection of the orchestrator and
// its workers through a ReplyDroppingProxy, which loses the reply to one chosen
// commit after the server made it, as a server dying between a commit and its
// reply would. The client reconnects and runs its work again (ride_out,
// common/db/database_outage.hpp), on rows that already hold what it wrote. One crawl
// per write the processes make, each with another one lost: every crawl must
// end as if nothing happened (sealed, succeeded, each hook run once, every
// process row closed, every process exiting 0).
#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/reply_dropping_proxy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

using namespace orch::test;

namespace {

// What a crawl of the sweep is made of, and what it must leave.
struct Shape {
    std::function<void(OrchFixture&)> write_hooks;
    std::vector<std::string> add_options;
    int seeds = 0;
    int snapshots = 0;       // sealed succeeded at the end
    int snapshot_hooks = 0;  // logging hooks per snapshot, each run once
    int crawl_hooks = 0;     // hook rows of the crawl's own hooks
};

struct InDoubtRun {
    OrchFixture f;
    ReplyDroppingProxy proxy{f.db.url()};
    Shape shape;
    int crawls = 0;
    int fewest_commits = std::numeric_limits<int>::max(); // COMMITs an armed crawl sent, its lost one included
    int most_commits = 0;

    explicit InDoubtRun(Shape s) : shape(std::move(s)) { shape.write_hooks(f); }

    std::unique_ptr<SpawnedProcess> start_orchestrator()
    {
        return std::make_unique<SpawnedProcess>(
            std::vector<std::string>{bin_path("orchestrator").string(), "--database-url", proxy.url(), "--data-dir",
                                     f.data.string(), "--machine-id", "machine-a", "--max-snapshot-workers", "2"},
            f.env({{"DB_OUTAGE_GRACE", "30"}}));
    }

    std::string add()
    {
        return f.add_crawl(OrchFixture::site_urls(shape.seeds, "http://site" + std::to_string(++crawls) + ".test/"),
                           shape.add_options);
    }

    // A crawl with nothing lost: which prepared statements and how many COMMITs a crawl sends.
    std::pair<std::vector<std::string>, int> learn()
    {
        const auto commits = proxy.commits();
        const auto id = add();
        auto orchestrator = start_orchestrator();
        REQUIRE(orchestrator->wait_for(std::chrono::seconds(60)));
        INFO(describe(*orchestrator));
        REQUIRE(orchestrator->exit_code() == 0);
        REQUIRE(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
        return {proxy.statements(), proxy.commits() - commits};
    }

    // One crawl by a one-shot orchestrator connected through the proxy; `arm`
    // arms it once the crawl is added. Checks how the crawl ended; returns
    // whether the armed reply was lost. An arm on a prepared statement must
    // fire; one on the nth COMMIT (`nth_commit`) fires exactly when the crawl
    // sent n read-write COMMITs, a number its timing moves (a held exit rides
    // with the next statement or is written alone).
    bool crawl(const std::string& what, const std::function<void()>& arm, int nth_commit = 0)
    {
        INFO(what);
        const auto id = add();
        const int dropped = proxy.dropped();
        const int commits = proxy.commits();
        arm();
        auto orchestrator = start_orchestrator();
        const bool ended = orchestrator->wait_for(std::chrono::seconds(60));
        proxy.disarm();
        const int sent = proxy.commits() - commits;
        fewest_commits = std::min(fewest_commits, sent);
        most_commits = std::max(most_commits, sent);
        INFO(describe(*orchestrator));
        REQUIRE(ended);
        CHECK(orchestrator->exit_code() == 0);
        const bool fired = proxy.dropped() == dropped + 1;
        CHECK(proxy.dropped() - dropped <= 1);
        CHECK(fired == (nth_commit == 0 || sent >= nth_commit));

        const auto crawl = f.quote(id);
        CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + crawl) == "sealed/succeeded");
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + crawl) == shape.snapshots);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + crawl +
                      " AND status = 'sealed' AND outcome = 'succeeded'") == shape.snapshots);
        CHECK(f.count("SELECT count(*) FROM archive_result a JOIN snapshot s ON s.id = a.snapshot_id "
                      "WHERE s.crawl_id = " + crawl + " AND a.status = 'succeeded'") ==
              shape.snapshots * shape.snapshot_hooks);
        CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook' AND crawl_id = " + crawl) ==
              shape.snapshots * shape.snapshot_hooks + shape.crawl_hooks);
        CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
        CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + crawl +
                      " AND exit_code IS DISTINCT FROM 0") == 0);
        // Each snapshot hook ran once on each snapshot.
        std::set<std::string> ours;
        for (const auto& row : f.rows("SELECT id FROM snapshot WHERE crawl_id = " + crawl)) {
            ours.insert(row[0]);
        }
        std::map<std::pair<std::string, std::string>, int> runs;
        for (const auto& run : f.hook_runs()) {
            if (ours.count(run.snapshot) != 0) {
                ++runs[{run.snapshot, run.hook}];
            }
        }
        CHECK(runs.size() == static_cast<std::size_t>(shape.snapshots * shape.snapshot_hooks));
        for (const auto& [key, n] : runs) {
            INFO(key.first << " " << key.second);
            CHECK(n == 1);
        }
        return fired;
    }

    void sweep(const std::string& name)
    {
        const auto [statements, commits] = learn();
        std::string names;
        for (const auto& statement : statements) {
            names += (names.empty() ? "" : ", ") + statement;
        }
        MEASURE("in-doubt sweep, " << name << ": " << statements.size() << " prepared statements (" << names
                                   << ") and " << commits << " COMMITs in a crawl");
        REQUIRE(statements.size() >= 10);
        for (const auto& statement : statements) {
            crawl("statement " + statement, [&] { proxy.arm_statement(statement); });
        }
        // A COMMIT that a crawl did not reach is tried again on another crawl
        // (read-only COMMITs, sent as often as the crawl polls, are not
        // counted; the read-write ones still vary by a few with timing).
        std::vector<int> never;
        for (int nth = 1; nth <= commits; ++nth) {
            bool fired = false;
            for (int attempt = 0; attempt < 3 && !fired; ++attempt) {
                fired = crawl("COMMIT " + std::to_string(nth), [&] { proxy.arm_commit(nth); }, nth);
            }
            if (!fired) {
                never.push_back(nth);
            }
        }
        MEASURE("in-doubt sweep, " << name << ": the armed crawls sent " << fewest_commits << " to " << most_commits
                                   << " COMMITs, the clean one " << commits << "; COMMITs never reached in 3 crawls: "
                                   << never.size());
        // Only the last ones of the clean crawl may be beyond a shorter crawl's end.
        for (int nth : never) {
            CHECK(nth > commits - 3);
        }
    }
};

} // namespace

TEST_CASE("a commit whose reply is lost - each write of a crawl in turn - the crawl ends as if nothing happened",
          "[in_doubt]")
{
    Shape plain;
    plain.write_hooks = [](OrchFixture& f) {
        // Long enough for the deferred writes (a running row, a held result) to be made on their own.
        f.write_logging_hook("slow", "on_Snapshot__10_slow.sh", 0.3);
        f.write_logging_hook("fast", "on_Snapshot__20_fast.sh", 0, ":\n");
    };
    plain.seeds = plain.snapshots = 3;
    plain.snapshot_hooks = 2;
    InDoubtRun(plain).sweep("3 URLs, 2 hooks");
}

TEST_CASE("a commit whose reply is lost - each write of a crawl with crawl hooks - discovery and a per-host limit - "
          "the crawl ends as if nothing happened",
          "[in_doubt]")
{
    Shape rich;
    rich.write_hooks = [](OrchFixture& f) {
        // A background crawl hook that lives until the crawl's teardown, and one at its end.
        f.write_hook("daemon", "on_Crawl__10_daemon.bg.sh", "sleep 30 &\nwait\n");
        f.write_hook("end", "on_CrawlEnd__10_end.sh", ":\n");
        f.write_logging_hook("links", "on_Snapshot__10_links.sh", 0,
                             "case \"$url\" in */a) ;; *) printf '{\"type\":\"Snapshot\",\"url\":\"%s/a\"}\\n' "
                             "\"$url\" ;; esac\n");
    };
    rich.add_options = {"--depth", "1", "--max-per-host", "1"};
    rich.seeds = 2;
    rich.snapshots = 4;
    rich.snapshot_hooks = 1;
    rich.crawl_hooks = 2;
    InDoubtRun(rich).sweep("2 URLs at depth 1, crawl hooks, max_per_host 1");
}

namespace {

// `orchestrator <args>` through a proxy that loses the reply to its first
// COMMIT (its migrations are applied already: nothing to commit there). It must
// ride the loss out and exit 0.
std::unique_ptr<SpawnedProcess> cli_with_commit_lost(OrchFixture& f, const std::vector<std::string>& args)
{
    ReplyDroppingProxy proxy{f.db.url()};
    proxy.arm_commit(1);
    std::vector<std::string> argv{bin_path("orchestrator").string(), "--database-url", proxy.url(), "--data-dir",
                                  f.data.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto cli = std::make_unique<SpawnedProcess>(argv, f.env({{"DB_OUTAGE_GRACE", "30"}}));
    REQUIRE(cli->wait_for(std::chrono::seconds(60)));
    INFO(describe(*cli));
    REQUIRE(proxy.dropped() == 1);
    CHECK(cli->exit_code() == 0);
    // Nothing claims the row it found as someone else's.
    CHECK(cli->err().find("exists already") == std::string::npos);
    return cli;
}

} // namespace

TEST_CASE("orchestrator add whose commit reply is lost - one crawl - its id printed - exit 0", "[in_doubt]")
{
    OrchFixture f;
    const auto add = cli_with_commit_lost(f, {"add", "https://in-doubt.test/", "--label", "once"});
    // Before the id was made by the client, the retry found nothing of its own
    // and exited 4: a rerun then added the crawl a second time.
    CHECK(f.count("SELECT count(*) FROM crawl WHERE label = 'once'") == 1);
    const auto id = f.scalar("SELECT id FROM crawl WHERE label = 'once'");
    CHECK(add->out().find(id) != std::string::npos);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.added' AND crawl_id = " + f.quote(id)) == 1);
}

TEST_CASE("orchestrator schedule add whose commit reply is lost - one schedule - exit 0", "[in_doubt]")
{
    OrchFixture f;
    const auto add = cli_with_commit_lost(f, {"schedule", "add", "--every", "@daily", "https://in-doubt.test/"});
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 1);
    CHECK(add->out().find(f.scalar("SELECT id FROM crawl_schedule")) != std::string::npos);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'schedule.added'") == 1);
}
