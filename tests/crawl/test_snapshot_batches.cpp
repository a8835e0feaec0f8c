// Snapshot workers taking their snapshots in batches (snapshot_worker/
// snapshot_batch.hpp, SNAPSHOT_WORKER_BATCH), against a real PostgreSQL and the
// real executables: the batch statement itself (SnapshotStore::
// seal_batch_and_claim), then crawls whose snapshots are quick, one that is
// slow behind a quick one, and a stop in the middle of a batch.

#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/base/random_id.hpp"
#include "common/work/snapshot_claims.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/reply_dropping_proxy.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <set>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

namespace {

constexpr std::chrono::seconds k_ttl{30};

// A started crawl leased to `crawl_owner` with `n` due snapshots, and a running
// snapshot worker row `self`.
struct BatchFixture {
    ScratchDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
    std::string crawl_owner = random_uuid();
    std::string self = random_uuid();
    std::string crawl_id;
    std::vector<Hook> hooks = std::vector<Hook>(2);

    explicit BatchFixture(int n)
    {
        pqxx::work tx(*conn);
        crawl_id = tx.exec_params1("INSERT INTO crawl (urls, status, started_at, lease_owner, lease_expires_at) "
                                   "VALUES ('{http://a.test/}', 'started', now(), $1, now() + interval '1 hour') "
                                   "RETURNING id",
                                   crawl_owner)[0]
                       .as<std::string>();
        // Created one after the other: claimed in that order.
        for (int i = 1; i <= n; ++i) {
            tx.exec_params0("INSERT INTO snapshot (crawl_id, url, retry_at, created_at) "
                            "VALUES ($1, 'http://a.test/' || $2::int, now() - interval '1 second', now() + make_interval(secs => $2::int))",
                            crawl_id, i);
        }
        tx.exec0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m', 'h', 'b', 1)");
        tx.exec_params0("INSERT INTO process (id, machine_id, process_type, worker_type, status, pid, started_at) "
                        "VALUES ($1, 'm', 'worker', 'snapshot', 'running', 4242, now())",
                        self);
        tx.commit();
        hooks[0].plugin = "p";
        hooks[0].file_name = "on_Snapshot__10_a.sh";
        hooks[1].plugin = "p";
        hooks[1].file_name = "on_Snapshot__20_b.sh";
    }

    std::string scalar(const std::string& sql)
    {
        pqxx::nontransaction tx(*conn);
        auto r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    }
    void exec(const std::string& sql) { pqxx::nontransaction(*conn).exec0(sql); }
    std::string quote(const std::string& v) { return conn->quote(v); }
    std::string url_of(const std::string& snapshot) { return scalar("SELECT url FROM snapshot WHERE id = " + quote(snapshot)); }

    // Claims `n` snapshots for `self` as a continuing worker's first claims do.
    std::vector<ClaimedSnapshot> claim(std::size_t n)
    {
        ClaimScope free_only;
        free_only.take_expired = false;
        return claim_due_snapshots(*conn, crawl_id, crawl_owner, std::vector<std::string>(n, self), k_ttl, free_only);
    }
    // A store for a snapshot held by `self`, its results made, one of them recorded with `status`.
    std::unique_ptr<SnapshotStore> store_of(pqxx::connection& c, const ClaimedSnapshot& claim, HookStatus status)
    {
        auto store = std::make_unique<SnapshotStore>(c, claim.snapshot_id, crawl_id);
        store->set_owner(self);
        auto results = store->ensure_results(hooks);
        HookResult result;
        result.status = status;
        store->record(results.at("p/on_Snapshot__10_a.sh").id, result, OutputFiles{});
        HookResult ok;
        ok.status = HookStatus::succeeded;
        store->record(results.at("p/on_Snapshot__20_b.sh").id, ok, OutputFiles{});
        return store;
    }
};

} // namespace

TEST_CASE("batch seal: seals a snapshot and those held with their results and claims the next batch - the first "
          "may have been attempted - the others never",
          "[snapshot_batches]")
{
    BatchFixture f(8);
    const auto first = f.claim(3);
    REQUIRE(first.size() == 3);
    // Snapshot 5 was attempted before (its worker died): it may lead a batch, not follow in one.
    f.exec("UPDATE snapshot SET attempts = 1 WHERE url = 'http://a.test/5'");
    auto a = f.store_of(*f.conn, first[0], HookStatus::succeeded);
    auto b = f.store_of(*f.conn, first[1], HookStatus::failed);
    auto c = f.store_of(*f.conn, first[2], HookStatus::succeeded);

    auto step = c->seal_batch_and_claim({a.get(), b.get()}, f.crawl_owner, k_ttl, {}, f.hooks, 4);
    REQUIRE(step.outcomes.size() == 3);
    CHECK(step.outcomes[0] == "succeeded");
    CHECK(step.outcomes[1] == "succeeded");
    CHECK(step.outcomes[2] == "partial");
    for (const auto& claim : first) {
        CHECK(f.scalar("SELECT status || '/' || sealed_by || '/' || (lease_owner IS NULL) FROM snapshot WHERE id = " +
                       f.quote(claim.snapshot_id)) == "sealed/" + f.self + "/true");
    }
    // Their held results written by the same statement.
    CHECK(f.scalar("SELECT count(*) FROM archive_result a JOIN snapshot s ON s.id = a.snapshot_id "
                   "WHERE s.status = 'sealed' AND a.status IN ('succeeded', 'failed')") == "6");
    // Snapshot 4, then 5 (attempted before) is left out: only the first may have been attempted.
    REQUIRE(step.next.size() == 3);
    CHECK(f.url_of(step.next[0].first.snapshot_id) == "http://a.test/4");
    CHECK(f.url_of(step.next[1].first.snapshot_id) == "http://a.test/6");
    CHECK(f.url_of(step.next[2].first.snapshot_id) == "http://a.test/7");
    for (const auto& [claim, results] : step.next) {
        CHECK(claim.owner == f.self);
        CHECK(claim.attempts == 1);
        CHECK(results.size() == 2);
        CHECK(results.at("p/on_Snapshot__10_a.sh").status == "queued");
        CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE snapshot_id = " + f.quote(claim.snapshot_id)) == "2");
    }
    CHECK(f.scalar("SELECT lease_owner IS NULL FROM snapshot WHERE url = 'http://a.test/5'") == "t");
    // The worker's row names the first of its batch.
    CHECK(f.scalar("SELECT snapshot_id FROM process WHERE id = " + f.quote(f.self)) == step.next[0].first.snapshot_id);

    // The attempted one leads the next batch.
    std::vector<std::unique_ptr<SnapshotStore>> held;
    for (std::size_t i = 0; i + 1 < step.next.size(); ++i) {
        held.push_back(f.store_of(*f.conn, step.next[i].first, HookStatus::succeeded));
    }
    auto last = f.store_of(*f.conn, step.next.back().first, HookStatus::succeeded);
    auto next = last->seal_batch_and_claim({held[0].get(), held[1].get()}, f.crawl_owner, k_ttl, {}, f.hooks, 4);
    REQUIRE(next.next.size() == 2);
    CHECK(f.url_of(next.next[0].first.snapshot_id) == "http://a.test/5");
    CHECK(next.next[0].first.attempts == 2);
    CHECK(f.url_of(next.next[1].first.snapshot_id) == "http://a.test/8");

    // A worker that does not hold a snapshot it names seals nothing and claims nothing.
    SnapshotStore stranger(*f.conn, next.next[0].first.snapshot_id, f.crawl_id);
    stranger.set_owner(random_uuid());
    CHECK_THROWS_AS(stranger.seal_batch_and_claim({}, f.crawl_owner, k_ttl, {}, f.hooks, 4), LeaseLost);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner = " + f.quote(f.self)) == "2");
}

TEST_CASE("batch seal whose reply is lost with the connection after it committed - the retry finds the seals ours "
          "and the claims read back",
          "[snapshot_batches]")
{
    BatchFixture f(5);
    ReplyDroppingProxy proxy(f.db.url());
    pqxx::connection through(proxy.url());
    OutagePolicy policy;
    policy.grace = std::chrono::seconds(10);
    set_outage_policy(policy);
    const auto first = f.claim(2);
    REQUIRE(first.size() == 2);
    auto a = f.store_of(through, first[0], HookStatus::succeeded);
    auto b = f.store_of(through, first[1], HookStatus::succeeded);
    proxy.arm_statement("snapshot_store.seal_batch_and_claim");
    auto step = b->seal_batch_and_claim({a.get()}, f.crawl_owner, k_ttl, {}, f.hooks, 3);
    set_outage_policy({});
    CHECK(proxy.dropped() == 1);
    CHECK(step.outcomes == std::vector<std::string>{"succeeded", "succeeded"});
    REQUIRE(step.next.size() == 3);
    std::set<std::string> urls;
    for (const auto& [claim, results] : step.next) {
        CHECK(claim.attempts == 1);
        CHECK(results.size() == 2);
        urls.insert(f.url_of(claim.snapshot_id));
    }
    CHECK(urls == std::set<std::string>{"http://a.test/3", "http://a.test/4", "http://a.test/5"});
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner = " + f.quote(f.self)) == "3");
    CHECK(f.scalar("SELECT sum(attempts) FROM snapshot") == "5");
}

TEST_CASE("snapshot worker: quick snapshots are claimed and sealed in batches - each with its hooks' rows and results",
          "[snapshot_batches]")
{
    CrawlFixture f;
    f.write_hook("quick", "on_Snapshot__10_a.sh", succeeded_record("a"));
    f.write_hook("quick", "on_Snapshot__20_b.sh",
                 "if [ \"$url\" = http://site.test/7 ]; then exit 3; fi\n" + succeeded_record("b"));
    auto id = f.add_crawl(CrawlFixture::site_urls(12));
    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND attempts = 1") == 12);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded'") == 11);
    CHECK(f.scalar("SELECT outcome FROM snapshot WHERE url = 'http://site.test/7'") == "partial");
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 23);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook' AND status = 'exited' "
                  "AND end_reason = 'exited'") == 24);
    // Batches: the rows of several snapshots' hooks were written by one statement
    // (one transaction, one now()), and the hooks ran one snapshot after another.
    CHECK(f.count("SELECT count(*) FROM (SELECT created_at FROM process WHERE process_type = 'hook' "
                  "GROUP BY created_at HAVING count(DISTINCT snapshot_id) > 1) batched") >= 2);
    CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'") == 1);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot worker: a slow snapshot behind a quick one in a batch - the quick one is sealed while the slow "
          "one runs",
          "[snapshot_batches]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto go = f.root / "go";
    f.write_hook("mixed", "on_Snapshot__10_a.sh",
                 "if [ \"$url\" = http://site.test/3 ]; then\n" + gated_hook(started, go) + "\nexit 0\nfi\n" +
                     succeeded_record("quick"));
    auto id = f.add_crawl(CrawlFixture::site_urls(4));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});
    // 1 ran alone and claimed 2, 3 and 4; 2 ran, its seal held; 3 waits for the gate.
    REQUIRE(poll_until([&] { return !read_lines(started).empty(); }, 30s));
    // The held seal is written within the write-behind window, not behind the slow one.
    CHECK(poll_until([&] { return f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed'") == 2; }, 5s));
    CHECK(f.scalar("SELECT status FROM snapshot WHERE url = 'http://site.test/2'") == "sealed");
    CHECK(f.scalar("SELECT status FROM snapshot WHERE url = 'http://site.test/3'") == "started");
    std::ofstream(go) << "1";
    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded' AND attempts = 1") == 4);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot worker: stopped in the middle of a batch - what ran is sealed - what it claimed and did not start "
          "goes back without an attempt",
          "[snapshot_batches]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    f.write_hook("mixed", "on_Snapshot__10_a.sh",
                 "if [ \"$url\" = http://site.test/3 ]; then\n" + slow_hook(started, terms) + "\nfi\n" +
                     succeeded_record("quick"));
    auto id = f.add_crawl(CrawlFixture::site_urls(6));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});
    REQUIRE(poll_until([&] { return !read_lines(started).empty(); }, 30s));
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 10);
    // 1 and 2 ran and are sealed; 3 was cut short and goes back; 4 and 5, claimed
    // with it, never started: free again, their attempt taken back, their hooks'
    // rows closed as not started; 6 was never claimed.
    CHECK(f.scalar("SELECT string_agg(url, ' ' ORDER BY url) FROM snapshot WHERE status = 'sealed'") ==
          "http://site.test/1 http://site.test/2");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == 0);
    CHECK(f.scalar("SELECT attempts FROM snapshot WHERE url = 'http://site.test/3'") == "1");
    CHECK(f.scalar("SELECT string_agg(attempts::text, ' ' ORDER BY url) FROM snapshot "
                   "WHERE url IN ('http://site.test/4', 'http://site.test/5', 'http://site.test/6')") == "0 0 0");
    CHECK(f.count("SELECT count(*) FROM process p JOIN snapshot s ON s.id = p.snapshot_id "
                  "WHERE p.process_type = 'hook' AND s.url IN ('http://site.test/4', 'http://site.test/5') "
                  "AND p.status = 'exited' AND p.end_reason = 'not_started'") == 2);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
    // Resumed with a quick hook, it finishes them all: 3 on its second attempt, the others on their first.
    f.write_hook("mixed", "on_Snapshot__10_a.sh", succeeded_record("quick"));
    auto again = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});
    INFO(again->output());
    CHECK(again->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded'") == 6);
    CHECK(f.scalar("SELECT string_agg(attempts::text, ' ' ORDER BY url) FROM snapshot") == "1 1 2 1 1 1");
}

TEST_CASE("snapshot worker: the leases of a batch's later snapshots are renewed on time - none runs past its expiry "
          "behind those before it",
          "[snapshot_batches][lease]")
{
    CrawlFixture f;
    // TTL 3 s, renewed every second: 1 is quick and claims 2-5 at once; each of
    // those runs 0.9 s, never long enough to renew its own lease. 5 starts 2.7 s
    // after the claim: renewals counted from its start would let its lease
    // expire at 3 s while it runs (and recovery take the worker for stalled).
    f.write_hook("paced", "on_Snapshot__10_a.sh",
                 "if [ \"$url\" != http://site.test/1 ]; then sleep 0.9; fi\n" + succeeded_record("paced"));
    auto id = f.add_crawl(CrawlFixture::site_urls(5));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}, {"LEASE_TTL", "3"}});
    long expired_seen = 0;
    long polls = 0;
    while (!p->wait_for(20ms)) {
        expired_seen = std::max(expired_seen, f.count("SELECT count(*) FROM snapshot WHERE status <> 'sealed' "
                                                      "AND lease_owner IS NOT NULL AND lease_expires_at < now()"));
        ++polls;
    }
    INFO(p->output());
    CHECK(polls > 50);
    CHECK(p->exit_code() == 0);
    CHECK(expired_seen == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded' AND attempts = 1") == 5);
    // They ran as one batch: the rows of 2-5's hooks were written by one statement.
    CHECK(f.count("SELECT count(DISTINCT snapshot_id) FROM process WHERE process_type = 'hook' AND created_at = "
                  "(SELECT p.created_at FROM process p JOIN snapshot s ON s.id = p.snapshot_id "
                  " WHERE s.url = 'http://site.test/5' AND p.process_type = 'hook')") == 4);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot worker: a retried snapshot leading a batch is sealed at once - a neighbour's death behind it "
          "does not charge it again",
          "[snapshot_batches][interrupts]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto go = f.root / "go";
    auto killed = f.root / "killed";
    // 1 is held at a gate while 3 is made a snapshot charged once already (as a
    // neighbour's death does) and 2 the oldest due. Then 1 ends, not quick (it
    // outlasts the write-behind window), so 2 is claimed alone; 2 is quick, so it claims 3 (any kind first)
    // with 4 and 5 (never attempted) behind it. 3 is quick; 4 kills its worker
    // on its first run. Held, 3's seal would die with the worker, and the death
    // charged to it would be its second of SNAPSHOT_MAX_ATTEMPTS=2: sealed failed
    // although all its hooks succeeded.
    f.write_hook("mixed", "on_Snapshot__10_a.sh",
                 "if [ \"$url\" = http://site.test/1 ]; then\n" + gated_hook(started, go) + "\nsleep 0.4\nexit 0\nfi\n" +
                     "if [ \"$url\" = http://site.test/4 ] && [ ! -e '" + killed.string() + "' ]; then touch '" +
                     killed.string() + "'; kill -9 \"$PPID\"; sleep 30; fi\n" + succeeded_record("quick"));
    auto id = f.add_crawl(CrawlFixture::site_urls(5));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}, {"SNAPSHOT_MAX_ATTEMPTS", "2"}});
    REQUIRE(poll_until([&] { return !read_lines(started).empty(); }, 30s));
    f.exec("UPDATE snapshot SET retry_at = now() - interval '2 hours' WHERE url = 'http://site.test/2'");
    f.exec("UPDATE snapshot SET attempts = 1, retry_at = now() - interval '1 hour' WHERE url = 'http://site.test/3'");
    std::ofstream(go) << "1";
    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    REQUIRE(std::filesystem::exists(killed));
    CHECK(f.scalar("SELECT outcome || '/' || attempts FROM snapshot WHERE url = 'http://site.test/3'") == "succeeded/2");
    // The neighbours that died with the worker ran again.
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded'") == 5);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot worker: a held snapshot whose lease was taken does not cut short the snapshot running after it",
          "[snapshot_batches][lease]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto go = f.root / "go";
    auto runs = f.root / "runs";
    // 1 is quick and claims 2 and 3. While 2 waits at its gate its lease is
    // taken from the worker; 2 then ends quickly and its seal is held, and
    // falls due while 3 runs (0.6 s). That seal finds the lease gone: 3 must
    // run to its end and be sealed, not be torn down and left leased to a
    // worker that exited. (Should 2 take longer than the write-behind window,
    // it seals at once, finds the lease gone and the worker stops before 3,
    // giving it back unstarted: the checks below hold then too.)
    f.write_hook("mixed", "on_Snapshot__10_a.sh",
                 "echo \"$url\" >> '" + runs.string() + "'\n" +
                     "if [ \"$url\" = http://site.test/2 ]; then\n" + gated_hook(started, go) + "\nexit 0\nfi\n" +
                     "if [ \"$url\" = http://site.test/3 ]; then sleep 0.6; fi\n" + succeeded_record("quick"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});
    REQUIRE(poll_until([&] { return !read_lines(started).empty(); }, 30s));
    f.exec("UPDATE snapshot SET lease_owner = NULL, lease_expires_at = NULL WHERE url = 'http://site.test/2'");
    std::ofstream(go) << "1";
    // Well before the 30 s lease a snapshot left leased to the exited worker would wait out.
    REQUIRE(p->wait_for(20s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'succeeded'") == 3);
    auto lines = read_lines(runs);
    CHECK(std::count(lines.begin(), lines.end(), "http://site.test/3") == 1);
    CHECK(f.scalar("SELECT attempts FROM snapshot WHERE url = 'http://site.test/3'") == "1");
    CHECK(f.wait_no_leftovers().empty());
}
