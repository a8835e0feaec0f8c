// crawl_worker end to end: real PostgreSQL, the real crawl_worker and
// snapshot_worker executables, bash hooks written by the tests.

#include "common/base/write_behind.hpp"
#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/row_history.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <sstream>

using namespace orch::test;
using namespace std::chrono_literals;

namespace {

// A hook that marks itself running under its URL's host, counts the marks (an
// upper bound of how many of its host run: two starting together see each
// other) into seen.<host>, and stays 0.4 s.
void write_host_marking_hook(CrawlFixture& f)
{
    const auto running = f.root / "running";
    f.write_hook("polite", "on_Snapshot__10_polite.sh",
                 "host=$(printf '%s' \"$url\" | sed -E 's|^[a-z]+://([^/:]+).*|\\1|')\n"
                 "mkdir -p '" + running.string() + "/'$host\n"
                 "touch '" + running.string() + "/'$host/$$\n"
                 "ls '" + running.string() + "/'$host | wc -l >> '" + (f.root / "seen.").string() + "'$host\n"
                 "sleep 0.4\n"
                 "rm '" + running.string() + "/'$host/$$\n" + succeeded_record("polite"));
}

// The most snapshots of `host` the marking hook saw running at once.
int most_running(CrawlFixture& f, const std::string& host)
{
    int most = 0;
    for (const auto& line : read_lines(f.root / ("seen." + host))) {
        most = std::max(most, std::stoi(line));
    }
    return most;
}

// 6 URLs of a.test, then 3 of b.test.
std::vector<std::string> two_host_urls()
{
    std::vector<std::string> urls;
    for (int i = 1; i <= 6; ++i) {
        urls.push_back("http://a.test/" + std::to_string(i));
    }
    for (int i = 1; i <= 3; ++i) {
        urls.push_back("http://b.test/" + std::to_string(i));
    }
    return urls;
}

} // namespace

TEST_CASE("crawl_worker: a crawl of 20 URLs completes with its process tree recorded", "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", "echo \"$url\" > saved.txt\n" + succeeded_record("saved"));
    f.write_hook("meta", "on_Snapshot__20_meta.sh", "exit 0\n"); // no record: noresults
    auto id = f.add_crawl(CrawlFixture::site_urls(20));
    auto q = f.quote(id);

    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.scalar("SELECT lease_owner FROM crawl WHERE id = " + q).empty());
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q +
                  " AND status = 'sealed' AND outcome = 'succeeded' AND lease_owner IS NULL") == 20);

    // Archive results: one per hook and snapshot, each pointing at the hook's process row.
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE plugin = 'save' AND status = 'succeeded'") == 20);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE plugin = 'meta' AND status = 'noresults'") == 20);
    CHECK(f.count("SELECT count(*) FROM archive_result ar JOIN process p ON p.id = ar.process_id "
                  "WHERE p.process_type = 'hook' AND p.snapshot_id = ar.snapshot_id") == 40);
    for (const auto& row : f.rows("SELECT id, url FROM snapshot WHERE crawl_id = " + q)) {
        CHECK(read_text(f.data / "snapshots" / row[0] / "save" / "saved.txt") == row[1] + "\n");
    }

    // crawl_worker -> snapshot_worker -> hook, and nothing outside that tree.
    auto root = f.rows("SELECT id, parent_id FROM process WHERE worker_type = 'crawl' AND crawl_id = " + q);
    REQUIRE(root.size() == 1);
    CHECK(root[0][1].empty()); // run by hand: registered itself
    auto levels = f.rows("WITH RECURSIVE t(id, depth) AS ("
                         "  SELECT id, 0 FROM process WHERE id = " + f.quote(root[0][0]) +
                         "  UNION ALL SELECT p.id, t.depth + 1 FROM process p JOIN t ON p.parent_id = t.id) "
                         "SELECT depth, count(*) FROM t GROUP BY depth ORDER BY depth");
    // At most 8 snapshot workers (the default), each taking snapshot after snapshot.
    const auto workers = f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'");
    CHECK(workers >= 1);
    CHECK(workers <= 8);
    CHECK(levels == std::vector<std::vector<std::string>>{{"0", "1"}, {"1", std::to_string(workers)}, {"2", "40"}});
    CHECK(f.count("SELECT count(*) FROM process") == 1 + workers + 40);
    CHECK(f.count("SELECT count(*) FROM process WHERE parent_id = " + f.quote(root[0][0]) +
                  " AND process_type = 'worker' AND worker_type = 'snapshot' AND crawl_id = " + q) == workers);
    // Each hook hangs under a snapshot worker, and all hooks of a snapshot under the same one.
    CHECK(f.count("SELECT count(*) FROM process h JOIN process w ON w.id = h.parent_id "
                  "WHERE h.process_type = 'hook' AND w.worker_type = 'snapshot' AND h.crawl_id = w.crawl_id") == 40);
    CHECK(f.count("SELECT count(*) FROM (SELECT snapshot_id FROM process WHERE process_type = 'hook' "
                  "  GROUP BY snapshot_id HAVING count(DISTINCT parent_id) = 1) one_worker") == 20);
    // A worker row names the last snapshot it took.
    CHECK(f.count("SELECT count(*) FROM process w JOIN snapshot s ON s.id = w.snapshot_id "
                  "WHERE w.worker_type = 'snapshot' AND s.crawl_id = " + q) == workers);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited' OR ended_at IS NULL") == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE exit_code IS DISTINCT FROM 0") == 0);
    // The last snapshot worker's exit is written by the crawl's seal, in its
    // transaction, unless the write-behind timer's flush carried it: that flush
    // is due a window after the oldest exit it holds, so on a busy machine it can
    // fire late, after the last exit, and take it along just before the seal.
    // Then some exit written with it (the oldest, maybe this one) ended at least
    // a window before the seal. What fails is the last exit written without such
    // a reason, in a round trip of its own before the seal.
    CHECK(f.scalar("SELECT (w.xmin::text = c.xmin::text OR EXISTS (SELECT 1 FROM process o "
                   "  WHERE o.xmin::text = w.xmin::text AND c.sealed_at - o.ended_at >= make_interval(secs => " +
                   std::to_string(orch::k_write_behind_window.count() / 1000.0) + ")))::text "
                   "FROM process w, crawl c WHERE c.id = " + q +
                   " AND w.worker_type = 'snapshot' ORDER BY w.ended_at DESC LIMIT 1") == "true");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: never more than N snapshot workers at once", "[crawl_worker]")
{
    CrawlFixture f;
    auto counts = f.root / "counts";
    f.write_hook("count", "on_Snapshot__10_count.sh",
                 count_snapshot_workers_function(f.data) + "count >> '" + counts.string() +
                     "'\nsleep 0.6\ncount >> '" + counts.string() + "'\n" + succeeded_record("counted"));
    auto id = f.add_crawl(CrawlFixture::site_urls(9));
    auto q = f.quote(id);

    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "3"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");

    // From the OS: what the hooks saw while they ran.
    auto seen = read_lines(counts);
    REQUIRE(seen.size() == 18);
    int most = 0;
    for (const auto& line : seen) {
        most = std::max(most, std::stoi(line));
    }
    CHECK(most <= 3);
    CHECK(most >= 2); // the workers did run side by side

    // From the process table: overlapping [started_at, ended_at) of worker rows. The three
    // workers started on the first three snapshots took the other six themselves.
    CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot' AND crawl_id = " + q) == 3);
    auto overlap = f.count("SELECT max(c) FROM (SELECT (SELECT count(*) FROM process s "
                           "  WHERE s.worker_type = 'snapshot' AND s.crawl_id = r.crawl_id "
                           "    AND s.started_at <= r.started_at AND s.ended_at > r.started_at) c "
                           "  FROM process r WHERE r.worker_type = 'snapshot' AND r.crawl_id = " + q + ") t");
    CHECK(overlap <= 3);
    CHECK(overlap >= 2);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: --max-per-host bounds the snapshots of one host running at once - other hosts go ahead",
          "[crawl_worker]")
{
    CrawlFixture f;
    write_host_marking_hook(f);
    auto id = f.add_crawl(two_host_urls(), {"--max-per-host", "2"});
    auto q = f.quote(id);
    CHECK(f.scalar("SELECT max_per_host FROM crawl WHERE id = " + q) == "2");

    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "4"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");

    // From the OS: never more than 2 of a host at once, and 2 did run together.
    CHECK(most_running(f, "a.test") == 2);
    CHECK(most_running(f, "b.test") == 2);
    // From the snapshot rows: the same per host, and up to 4 at once in all (b.test
    // did not wait for a.test).
    auto overlap = [&](const std::string& filter) {
        return f.count("WITH iv AS (SELECT started_at s, sealed_at e FROM snapshot WHERE crawl_id = " + q + filter +
                       ") SELECT max((SELECT count(*) FROM iv j WHERE j.s <= i.s AND j.e > i.s)) FROM iv i");
    };
    CHECK(overlap(" AND url LIKE 'http://a.test/%'") == 2);
    CHECK(overlap(" AND url LIKE 'http://b.test/%'") == 2);
    CHECK(overlap("") >= 3);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: DEFAULT_MAX_PER_HOST governs the crawls without --max-per-host - a crawl's own wins",
          "[crawl_worker]")
{
    CrawlFixture f;
    write_host_marking_hook(f);
    auto plain = f.add_crawl(two_host_urls());
    auto p = f.run(plain, {{"MAX_SNAPSHOT_WORKERS", "4"}, {"DEFAULT_MAX_PER_HOST", "1"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(plain)) == "succeeded");
    CHECK(most_running(f, "a.test") == 1);
    CHECK(most_running(f, "b.test") == 1);

    std::filesystem::remove(f.root / "seen.a.test");
    std::filesystem::remove(f.root / "seen.b.test");
    auto own = f.add_crawl(two_host_urls(), {"--max-per-host", "2"});
    auto q = f.run(own, {{"MAX_SNAPSHOT_WORKERS", "4"}, {"DEFAULT_MAX_PER_HOST", "1"}});
    INFO(q->output());
    CHECK(q->exit_code() == 0);
    CHECK(most_running(f, "a.test") == 2);

    // Out of range: refused before the crawl is claimed.
    auto bad = f.add_crawl({"http://c.test/1"});
    auto r = f.run(bad, {{"DEFAULT_MAX_PER_HOST", "-1"}});
    CHECK(r->exit_code() != 0);
    CHECK(r->output().find("DEFAULT_MAX_PER_HOST") != std::string::npos);
    CHECK(f.scalar("SELECT status FROM crawl WHERE id = " + f.quote(bad)) == "queued");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: --host-delay spaces the starts of one host's snapshots - other hosts go ahead",
          "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("quick", "on_Snapshot__10_quick.sh", "sleep 0.05\n" + succeeded_record("quick"));
    auto id = f.add_crawl({"http://a.test/1", "http://a.test/2", "http://a.test/3", "http://b.test/1",
                           "http://b.test/2"},
                          {"--host-delay", "1"});
    auto q = f.quote(id);
    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "4"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");
    // The shortest gap between two starts of one host (a start is the wall clock of
    // its claim, after any wait for the crawl's claim lock: the delay's own clock).
    auto shortest_gap = [&](const std::string& host) {
        return std::stod(f.scalar("SELECT min(gap) FROM (SELECT extract(epoch FROM started_at - lag(started_at) "
                                  "OVER (ORDER BY started_at)) AS gap FROM snapshot WHERE crawl_id = " + q +
                                  " AND url LIKE 'http://" + host + "/%') g"));
    };
    CHECK(shortest_gap("a.test") >= 0.99);
    CHECK(shortest_gap("b.test") >= 0.99);
    // The other host's first snapshot did not wait out the first host's delay:
    // the two first claims are two statements back to back, a delay over the
    // whole crawl (or one host's first queued behind the other's) puts a full
    // delay between them. The delay itself is the margin.
    CHECK(std::stod(f.scalar("SELECT abs(extract(epoch FROM (SELECT min(started_at) FROM snapshot WHERE crawl_id = " +
                             q + " AND url LIKE 'http://a.test/%') - (SELECT min(started_at) FROM snapshot WHERE "
                             "crawl_id = " + q + " AND url LIKE 'http://b.test/%')))")) < 1.0);
    // The claim times lived as long as the crawl ran (migration 0017).
    CHECK(f.scalar("SELECT count(*) FROM crawl_host_claim WHERE crawl_id = " + q) == "0");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: a background crawl hook with children is up for every snapshot - gone after the seal",
          "[crawl_worker]")
{
    CrawlFixture f;
    auto seen = f.root / "browser_seen";
    f.write_hook("browser", "on_Crawl__10_browser.bg.sh", browser_hook());
    f.write_hook("shot", "on_Snapshot__10_shot.sh", check_browser_hook(seen) + succeeded_record("shot"));
    f.write_hook("report", "on_CrawlEnd__10_report.sh", "ls \"$DATA_DIR/snapshots\" | wc -l > end.txt\n");
    auto id = f.add_crawl(CrawlFixture::site_urls(6));
    auto q = f.quote(id);

    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "3"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");

    auto lines = read_lines(seen);
    CHECK(lines.size() == 6);
    for (const auto& line : lines) {
        CHECK(line.substr(line.find(' ') + 1) == "up");
    }

    // The whole browser tree is gone, including the children that ignore SIGTERM.
    auto crawl_dir = f.data / "crawls" / id;
    std::istringstream pid_text(read_text(crawl_dir / "browser" / "pids"));
    std::vector<pid_t> pids;
    for (pid_t pid = 0; pid_text >> pid;) {
        pids.push_back(pid);
    }
    REQUIRE(pids.size() == 11);
    CHECK(poll_until([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }, 10s));

    // Torn down before the seal; CrawlEnd ran after every snapshot, before the seal.
    auto bg = f.rows("SELECT status, (ended_at <= (SELECT sealed_at FROM crawl WHERE id = " + q +
                     "))::text FROM process WHERE hook_name LIKE '%browser%'");
    REQUIRE(bg.size() == 1);
    CHECK(bg[0] == std::vector<std::string>{"exited", "true"});
    CHECK(read_text(crawl_dir / "report" / "end.txt") == "6\n");
    CHECK(f.scalar("SELECT (p.started_at >= (SELECT max(sealed_at) FROM snapshot WHERE crawl_id = " + q +
                   ") AND p.ended_at <= c.sealed_at)::text FROM process p, crawl c "
                   "WHERE p.hook_name LIKE '%report%' AND c.id = " + q) == "true");
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: discovered URLs are crawled within max_depth and max_urls", "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("links", "on_Snapshot__10_links.sh",
                 "printf '{\"type\":\"Snapshot\",\"url\":\"%s/a\"}\\n{\"type\":\"Snapshot\",\"url\":\"%s/b\"}\\n' "
                 "\"$url\" \"$url\"\n" +
                     succeeded_record("links"));

    SECTION("max_depth 1: seeds and their links, not the links' links")
    {
        auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--depth", "1"});
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        auto q = f.quote(id);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded'") == 6);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND depth = 1") == 4);
        CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");
    }
    SECTION("max_urls caps the number of snapshots")
    {
        auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--depth", "3", "--max-urls", "5"});
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        auto q = f.quote(id);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q) == 5);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded'") == 5);
    }
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: the crawl outcome - failed only when no snapshot succeeded or was partial", "[crawl_worker]")
{
    CrawlFixture f;
    // Under /half/ one hook of two fails (the snapshot is partial), under /fail/ both do.
    f.write_hook("save", "on_Snapshot__10_save.sh",
                 "case \"$url\" in */fail/*) exit 1;; esac\n" + succeeded_record("saved"));
    f.write_hook("meta", "on_Snapshot__20_meta.sh",
                 "case \"$url\" in */fail/*|*/half/*) exit 1;; esac\n" + succeeded_record("meta"));
    // Snapshot outcomes, then the crawl's.
    auto outcomes = [&](const std::vector<std::string>& urls) {
        auto id = f.add_crawl(urls);
        auto q = f.quote(id);
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        return f.scalar("SELECT string_agg(outcome, ' ' ORDER BY url) FROM snapshot WHERE crawl_id = " + q) + " -> " +
               f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q);
    };
    CHECK(outcomes({"http://site.test/half/1", "http://site.test/half/2"}) == "partial partial -> sealed/partial");
    CHECK(outcomes({"http://site.test/fail/1", "http://site.test/half/1"}) == "failed partial -> sealed/partial");
    CHECK(outcomes({"http://site.test/fail/1", "http://site.test/ok/1"}) == "failed succeeded -> sealed/partial");
    CHECK(outcomes({"http://site.test/fail/1", "http://site.test/fail/2"}) == "failed failed -> sealed/failed");
    CHECK(outcomes({"http://site.test/ok/1", "http://site.test/ok/2"}) == "succeeded succeeded -> sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.sealed' AND (detail->>'partial')::int = 2") == 1);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: Crawl hooks run in step order - a failing one stops the crawl only if required",
          "[crawl_worker]")
{
    CrawlFixture f;
    auto order = f.root / "order";
    f.write_hook("late", "on_Crawl__20_late.sh", "echo late >> '" + order.string() + "'\n");
    f.write_hook("gate", "on_Crawl__10_gate.sh", "echo gate >> '" + order.string() + "'\nexit 3\n");
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto q = f.quote(id);

    SECTION("not required (the default): the crawl goes on")
    {
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        CHECK(read_lines(order) == std::vector<std::string>{"gate", "late"});
        CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + q) == "succeeded");
        CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 2);
        CHECK(f.scalar("SELECT exit_code FROM process WHERE hook_name LIKE '%gate%'") == "3");
    }
    SECTION("required: the crawl is sealed failed, no snapshot runs")
    {
        f.write_config("gate", R"({"required": true})");
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/failed");
        CHECK_THAT(f.scalar("SELECT seal_reason FROM crawl WHERE id = " + q), Catch::Contains("required"));
        CHECK(f.count("SELECT count(*) FROM archive_result") == 0);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status <> 'sealed'") == 0);
        CHECK(f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'") == 0);
    }
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: unknown - malformed and sealed crawl ids", "[crawl_worker]")
{
    CrawlFixture f;
    SECTION("unknown crawl: 6, not found")
    {
        auto p = f.run("4b1c2a3e-0000-4000-8000-000000000000");
        CHECK(p->exit_code() == 6);
        CHECK_THAT(p->output(), Catch::Contains("not found"));
    }
    SECTION("malformed id: 7")
    {
        auto p = f.run("not-a-uuid");
        CHECK(p->exit_code() == 7);
        CHECK_THAT(p->output(), Catch::Contains("not-a-uuid"));
    }
    SECTION("already sealed: 0, nothing run")
    {
        f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
        auto id = f.add_crawl(CrawlFixture::site_urls(1));
        f.exec("UPDATE crawl SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), retry_at = NULL "
               "WHERE id = " + f.quote(id));
        auto p = f.run(id);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        CHECK(f.count("SELECT count(*) FROM snapshot") == 0);
        CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook'") == 0);
    }
}

TEST_CASE("crawl_worker: a PLUGINS allow-list with a name no plugin has is refused (3) - nothing runs or seals",
          "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(1));
    // "svae": every plugin would be off and the crawl would seal succeeded with nothing archived.
    auto p = f.run(id, {{"PLUGINS", "svae"}});
    INFO(p->output());
    CHECK(p->exit_code() == 3);
    CHECK_THAT(p->output(), Catch::Contains("PLUGINS lists svae"));
    CHECK(f.scalar("SELECT status FROM crawl WHERE id = " + f.quote(id)) != "sealed");
    CHECK(f.count("SELECT count(*) FROM archive_result") == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook'") == 0);
    // Spelled right, it runs.
    auto ok = f.run(id, {{"PLUGINS", "save"}});
    INFO(ok->output());
    CHECK(ok->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
}

TEST_CASE("crawl_worker: spawned by the orchestrator - the tree is orchestrator -> crawl -> snapshot -> hook",
          "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    std::vector<std::string> orchestrator = {bin_path("orchestrator").string(), "--database-url", f.db.url(),
                                             "--data-dir", f.data.string(), "--idle-window", "0"};
    CrawlWorkerProcess p(orchestrator, f.env(), f.root / "orchestrator.log");
    REQUIRE(p.wait_for(60s));
    INFO(p.output());
    CHECK(p.exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(id)) == "sealed/succeeded");
    auto levels = f.rows("WITH RECURSIVE t(id, depth, kind) AS ("
                         "  SELECT id, 0, process_type FROM process WHERE parent_id IS NULL"
                         "  UNION ALL SELECT p.id, t.depth + 1, p.process_type || coalesce('/' || p.worker_type, '') "
                         "  FROM process p JOIN t ON p.parent_id = t.id) "
                         "SELECT depth, kind, count(*) FROM t GROUP BY depth, kind ORDER BY depth");
    CHECK(levels == std::vector<std::vector<std::string>>{{"0", "orchestrator", "1"},
                                                          {"1", "worker/crawl", "1"},
                                                          {"2", "worker/snapshot", "3"},
                                                          {"3", "hook", "3"}});
    CHECK(f.count("SELECT count(*) FROM process") == 8);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited' OR exit_code IS DISTINCT FROM 0") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: one worker takes snapshot after snapshot at once - a recycled worker is replaced at once",
          "[crawl_worker]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", "sleep 0.2\n" + succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(6));
    // Every write to the snapshot and process rows, with its transaction: "at
    // once" is judged by which statement did what, not by gaps between clocks.
    record_row_history(f.db.url(), "snapshot");
    record_row_history(f.db.url(), "process");
    // One worker at a time, each recycled after two snapshots: three workers in turn.
    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_MAX_SNAPSHOTS", "2"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND outcome = 'succeeded'") == 6);
    // The gaps, for the log (seal to the next start; a worker's end to the next one's start).
    for (const auto* sql : {"SELECT string_agg(round(gap::numeric, 3)::text, ' ') FROM (SELECT extract(epoch FROM "
                            "started_at - lag(sealed_at) OVER (ORDER BY started_at)) gap FROM snapshot) g",
                            "SELECT string_agg(round(gap::numeric, 3)::text, ' ') FROM (SELECT extract(epoch FROM "
                            "started_at - lag(ended_at) OVER (ORDER BY started_at)) gap FROM process "
                            "WHERE worker_type = 'snapshot') g"}) {
        INFO("gaps (s): " << f.scalar(sql));
    }
    // A worker's next snapshot is claimed by the statement that seals its
    // previous one: the claim (queued -> started, leased to that worker) is in
    // the seal's transaction. One per worker: the second of its two (its first
    // was claimed for it by the crawl worker). A worker that waited or polled
    // for its next snapshot would claim it in a statement of its own.
    const std::string claimed_by_seal =
        "SELECT count(*) FROM test_row_history c JOIN test_row_history s ON s.txid = c.txid "
        "WHERE c.tbl = 'snapshot' AND c.op = 'UPDATE' AND c.old->>'status' = 'queued' "
        "  AND c.new->>'status' = 'started' "
        "  AND s.tbl = 'snapshot' AND s.op = 'UPDATE' AND s.old->>'status' <> 'sealed' "
        "  AND s.new->>'status' = 'sealed' AND s.old->>'lease_owner' = c.new->>'lease_owner'";
    CHECK(f.count(claimed_by_seal) == 3);
    // A worker that ended (recycled) is replaced at once: the crawl worker takes
    // its exit and launches the next one without going back to its poll. The
    // exit is then still held (its write waits a write-behind window, or the
    // next process_events) and rides on the next worker's row insert: its
    // write and that insert are one transaction. A replacement left to the
    // crawl worker's next claim tick (up to a second later) finds the exit
    // written on its own by then. The last worker's exit rides on the crawl's
    // seal instead: two of three. (A worker's row is inserted queued as a
    // 'worker'; its worker_type comes with its own running write.)
    const std::string exit_rode_on_insert =
        "SELECT count(*) FROM test_row_history e JOIN test_row_history i ON i.txid = e.txid "
        "WHERE e.tbl = 'process' AND e.op = 'UPDATE' AND e.new->>'worker_type' = 'snapshot' "
        "  AND e.old->>'status' <> 'exited' AND e.new->>'status' = 'exited' "
        "  AND i.tbl = 'process' AND i.op = 'INSERT' AND i.new->>'process_type' = 'worker'";
    CHECK(f.count(exit_rode_on_insert) == 2);
    // Each worker ran the hooks of two snapshots.
    CHECK(f.rows("SELECT count(DISTINCT h.snapshot_id) FROM process w JOIN process h ON h.parent_id = w.id "
                 "WHERE w.worker_type = 'snapshot' GROUP BY w.id") == std::vector<std::vector<std::string>>{{"2"}, {"2"}, {"2"}});
}
