// crawl_worker under stress: dead snapshot workers, cancellation, the crawl
// timeout and SIGTERM. Real PostgreSQL, real executables, bash hooks.

#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Checks shared by every interrupted crawl: every process row closed, nothing
// left running in the OS, no archive result half-written ('started'); once the
// crawl is sealed, none left to do ('queued') either.
void check_nothing_left(CrawlFixture& f, bool sealed = true)
{
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited' OR ended_at IS NULL") == 0);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'started'") == 0);
    if (sealed) {
        CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'queued'") == 0);
    }
    auto left = f.wait_no_leftovers();
    INFO("left: " << (left.empty() ? std::string() : left.front()));
    CHECK(left.empty());
}

// Appends $url to `runs`; the second run (of any snapshot) writes its URL to
// `victim` and hangs; every other run succeeds.
std::string second_run_hangs(const std::filesystem::path& runs, const std::filesystem::path& victim)
{
    return "echo \"$url\" >> '" + runs.string() + "'\n"
           "if [ \"$(wc -l < '" + runs.string() + "')\" = 2 ]; then\n"
           "  echo \"$url\" > '" + victim.string() + ".tmp' && mv '" + victim.string() + ".tmp' '" + victim.string() +
           "'\n"
           "  sleep 300\n"
           "fi\n" +
           succeeded_record("done");
}

} // namespace

TEST_CASE("crawl_worker: a SIGKILLed snapshot worker's snapshot is retried - its orphaned hooks torn down",
          "[crawl_worker][interrupts]")
{
    auto containment = GENERATE(std::string("auto"), std::string("fallback"));
    INFO("containment " << containment);
    CrawlFixture f;
    auto marker = f.root / "killed-once";
    auto orphan_pid = f.root / "orphan.pid";
    auto hook_pid = f.root / "hook.pid";
    // First attempt on site.test/1: a sleeping hook with a child that ignores SIGTERM.
    f.write_hook("slow", "on_Snapshot__10_slow.sh",
                 "if [ \"$url\" = http://site.test/1 ] && mkdir '" + marker.string() +
                     "' 2>/dev/null; then\n"
                     "  ( trap '' TERM; exec sleep 300 ) &\n"
                     "  echo $! > '" + orphan_pid.string() + ".tmp' && mv '" + orphan_pid.string() + ".tmp' '" +
                     orphan_pid.string() + "'\n"
                     "  echo $$ > '" + hook_pid.string() + "'\n"
                     "  sleep 300\n"
                     "fi\n" +
                     succeeded_record("done"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    CrawlEnv extra;
    if (containment == "fallback") {
        extra["ORCH_CONTAINMENT"] = "fallback";
    }
    auto p = f.start(id, extra);

    REQUIRE(poll_until([&] { return std::filesystem::exists(orphan_pid); }, 30s));
    auto snap = f.scalar("SELECT id FROM snapshot WHERE url = 'http://site.test/1'");
    auto worker = f.rows("SELECT id, pid FROM process WHERE process_type = 'worker' AND status = 'running' "
                         "AND snapshot_id = " + f.quote(snap));
    REQUIRE(worker.size() == 1);
    REQUIRE(::kill(std::stoi(worker[0][1]), SIGKILL) == 0);

    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    auto q = f.quote(snap);
    CHECK(f.scalar("SELECT status || '/' || outcome || '/' || attempts FROM snapshot WHERE id = " + q) ==
          "sealed/succeeded/2");
    CHECK(f.scalar("SELECT status FROM archive_result WHERE snapshot_id = " + q) == "succeeded");
    CHECK(f.scalar("SELECT term_signal FROM process WHERE id = " + f.quote(worker[0][0])) == "9");
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND snapshot_id = " + q) == 2);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    // The orphans (the hook and its TERM-ignoring child) are gone, recorded as such.
    auto orphan = std::stoi(read_text(orphan_pid));
    auto hook = std::stoi(read_text(hook_pid));
    CHECK(poll_until([&] { return !process_alive(orphan) && !process_alive(hook); }, 10s));
    CHECK(f.scalar("SELECT end_reason FROM process WHERE process_type = 'hook' AND parent_id = " +
                   f.quote(worker[0][0])) == "killed_on_recovery");
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: a worker SIGKILLed on a later snapshot - that snapshot is retried - the earlier ones stay sealed",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto runs = f.root / "runs";
    auto victim = f.root / "victim";
    // The single worker's second hook run hangs (first attempt only) and names its URL.
    f.write_hook("slow", "on_Snapshot__10_slow.sh", second_run_hangs(runs, victim));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    // One snapshot at a time (the next test has the same run in a batch).
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "1"}});

    REQUIRE(poll_until([&] { return std::filesystem::exists(victim); }, 30s));
    auto url = read_lines(victim).at(0);
    auto snap = f.scalar("SELECT id FROM snapshot WHERE url = " + f.quote(url));
    // The worker row moved on to the snapshot it now holds.
    auto worker = f.rows("SELECT id, pid, snapshot_id FROM process WHERE worker_type = 'snapshot' AND status = 'running'");
    REQUIRE(worker.size() == 1);
    CHECK(worker[0][2] == snap);
    CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE id = " + f.quote(snap)) == worker[0][0]);
    REQUIRE(::kill(std::stoi(worker[0][1]), SIGKILL) == 0);

    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    // The snapshot it died on ran again; the one it had sealed before did not.
    CHECK(f.scalar("SELECT status || '/' || outcome || '/' || attempts FROM snapshot WHERE id = " + f.quote(snap)) ==
          "sealed/succeeded/2");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND outcome = 'succeeded' AND attempts = 1") ==
          2);
    auto lines = read_lines(runs);
    CHECK(lines.size() == 4);
    CHECK(std::count(lines.begin(), lines.end(), url) == 2);
    CHECK(f.scalar("SELECT term_signal FROM process WHERE id = " + f.quote(worker[0][0])) == "9");
    // The killed worker, then one or two more (the retry waits a 1 s backoff, so a
    // worker may finish the third snapshot and leave before the retry is due).
    const auto workers = f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'");
    CHECK(workers >= 2);
    CHECK(workers <= 3);
    CHECK(f.scalar("SELECT end_reason FROM process WHERE process_type = 'hook' AND snapshot_id = " + f.quote(snap) +
                   " AND parent_id = " + f.quote(worker[0][0])) == "killed_on_recovery");
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: a worker SIGKILLed in a batch - each snapshot of the batch is retried - the earlier ones "
          "stay sealed",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto runs = f.root / "runs";
    auto victim = f.root / "victim";
    // As above, with batches: the first snapshot is quick, so the worker claims
    // the other two at once and hangs on the first of them.
    f.write_hook("slow", "on_Snapshot__10_slow.sh", second_run_hangs(runs, victim));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_BATCH", "4"}});

    REQUIRE(poll_until([&] { return std::filesystem::exists(victim); }, 30s));
    auto url = read_lines(victim).at(0);
    auto snap = f.scalar("SELECT id FROM snapshot WHERE url = " + f.quote(url));
    const auto first_url = read_lines(f.root / "runs").at(0);
    auto worker = f.rows("SELECT id, pid, snapshot_id FROM process WHERE worker_type = 'snapshot' AND status = 'running'");
    REQUIRE(worker.size() == 1);
    // Its row names the first snapshot of its batch, and it holds both.
    CHECK(worker[0][2] == snap);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status <> 'sealed' AND lease_owner = " + f.quote(worker[0][0])) ==
          2);
    // The rows of both snapshots' hooks were written before either started.
    CHECK(f.count("SELECT count(DISTINCT snapshot_id) FROM process WHERE process_type = 'hook' AND parent_id = " +
                  f.quote(worker[0][0]) + " AND snapshot_id <> (SELECT id FROM snapshot WHERE url = " +
                  f.quote(first_url) + ")") == 2);
    REQUIRE(::kill(std::stoi(worker[0][1]), SIGKILL) == 0);

    REQUIRE(p->wait_for(60s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    // Both snapshots it held were retried, each charged the death (which one it
    // died on is not recorded): the victim ran twice, the other once; the first
    // snapshot, sealed before, did not run again.
    CHECK(f.scalar("SELECT status || '/' || outcome || '/' || attempts FROM snapshot WHERE id = " + f.quote(snap)) ==
          "sealed/succeeded/2");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND outcome = 'succeeded' AND attempts = 2") ==
          2);
    CHECK(f.scalar("SELECT attempts FROM snapshot WHERE url = " + f.quote(first_url)) == "1");
    auto lines = read_lines(runs);
    CHECK(lines.size() == 4);
    CHECK(std::count(lines.begin(), lines.end(), url) == 2);
    CHECK(f.scalar("SELECT end_reason FROM process WHERE process_type = 'hook' AND snapshot_id = " + f.quote(snap) +
                   " AND parent_id = " + f.quote(worker[0][0])) == "killed_on_recovery");
    // The other snapshot's row, reserved and never started, is closed.
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook' AND parent_id = " + f.quote(worker[0][0]) +
                  " AND status <> 'exited'") == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: a snapshot whose worker always dies is sealed failed after the maximum attempts",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    f.write_hook("fatal", "on_Snapshot__10_fatal.sh",
                 "if [ \"$url\" = http://site.test/1 ]; then kill -9 \"$PPID\"; sleep 30; fi\n" +
                     succeeded_record("ok"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto p = f.run(id, {{"SNAPSHOT_MAX_ATTEMPTS", "2"}});
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    auto bad = f.rows("SELECT status, outcome, attempts, error FROM snapshot WHERE url = 'http://site.test/1'");
    REQUIRE(bad.size() == 1);
    CHECK(bad[0][0] == "sealed");
    CHECK(bad[0][1] == "failed");
    CHECK(bad[0][2] == "2");
    CHECK_THAT(bad[0][3], Catch::Contains("2 attempts"));
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND term_signal = 9") == 2);
    CHECK(f.scalar("SELECT outcome FROM snapshot WHERE url = 'http://site.test/2'") == "succeeded");
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(id)) == "sealed/partial");
    // Who sealed what (sealed_by): the crawl worker the snapshot it gave up on and
    // the crawl, a snapshot worker the one it archived.
    const auto sealer = [&](const std::string& table, const std::string& where) {
        return f.scalar("SELECT p.worker_type FROM " + table + " t JOIN process p ON p.id = t.sealed_by WHERE " + where);
    };
    CHECK(sealer("snapshot", "t.url = 'http://site.test/1'") == "crawl");
    CHECK(sealer("snapshot", "t.url = 'http://site.test/2'") == "snapshot");
    CHECK(sealer("crawl", "t.id = " + f.quote(id)) == "crawl");
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: cancellation in the database stops the crawl within about a second",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", slow_hook(started, terms) + succeeded_record("late"));
    auto id = f.add_crawl(CrawlFixture::site_urls(6));
    auto q = f.quote(id);
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "2"}});

    REQUIRE(poll_until([&] { return read_lines(started).size() == 2; }, 30s));
    auto t0 = Clock::now();
    f.exec("UPDATE crawl SET cancel_requested_at = now() WHERE id = " + q);
    // The workers' hooks get SIGTERM once the crawl worker has noticed.
    REQUIRE(poll_until([&] { return !read_lines(terms).empty(); }, 10s));
    CHECK(seconds_since(t0) < 4.0);
    REQUIRE(p->wait_for(30s));
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(read_lines(started).size() == 2); // nothing spawned after the cancel
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/cancelled");
    CHECK(f.scalar("SELECT lease_owner FROM crawl WHERE id = " + q).empty());
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status <> 'sealed'") == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'cancelled'") == 6);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: the crawl timeout seals the crawl timed_out", "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", slow_hook(started, terms) + succeeded_record("late"));
    auto id = f.add_crawl(CrawlFixture::site_urls(4), {"--timeout", "2"});
    auto q = f.quote(id);
    auto t0 = Clock::now();
    auto p = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "2"}}, 40s);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(seconds_since(t0) < 20.0);
    CHECK(read_lines(started).size() == 2);
    CHECK(read_lines(terms).size() == 2);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/timed_out");
    CHECK_THAT(f.scalar("SELECT seal_reason FROM crawl WHERE id = " + q), Catch::Contains("timed out"));
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status <> 'sealed'") == 0);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: SIGTERM releases the crawl unsealed - a second run finishes it", "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    auto fast = f.root / "fast";
    f.write_hook("slow", "on_Snapshot__10_slow.sh",
                 "if [ ! -e '" + fast.string() + "' ]; then\n" + slow_hook(started, terms) + "fi\n" +
                     succeeded_record("done"));
    auto id = f.add_crawl(CrawlFixture::site_urls(4));
    auto q = f.quote(id);
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "2"}});

    REQUIRE(poll_until([&] { return read_lines(started).size() == 2; }, 30s));
    auto t0 = Clock::now();
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(30s));
    INFO(p->output());
    CHECK(p->exit_code() == 10);
    CHECK(seconds_since(t0) < 15.0);
    CHECK(read_lines(terms).size() == 2);
    auto crawl = f.rows("SELECT status, outcome, lease_owner FROM crawl WHERE id = " + q);
    CHECK(crawl == std::vector<std::vector<std::string>>{{"started", "", ""}});
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL OR status = 'sealed'") == 0);
    check_nothing_left(f, false);

    // Resume: the same crawl, to the end.
    std::ofstream(fast) << "1";
    auto again = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "2"}});
    INFO(again->output());
    CHECK(again->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded'") == 4);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 4);
    check_nothing_left(f);
}

namespace {

// A directory whose snapshot_worker is a script that prints `message` and exits
// with `code` before touching anything, as a worker that cannot start would; the
// crawl worker finds its sibling executables through ORCH_BIN_DIR.
std::filesystem::path failing_worker_dir(CrawlFixture& f, int code, const std::string& message)
{
    auto dir = f.root / ("bin-exit-" + std::to_string(code));
    std::filesystem::create_directories(dir);
    auto exe = dir / "snapshot_worker";
    std::ofstream(exe) << "#!/bin/sh\necho 'snapshot_worker: error: " << message << "' >&2\nexit " << code << "\n";
    std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
    return dir;
}

} // namespace

TEST_CASE("crawl_worker: snapshot workers that die before claiming their snapshot still use up its attempts",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto bin = failing_worker_dir(f, 1, "out of memory");
    auto p = f.run(id, {{"ORCH_BIN_DIR", bin.string()}, {"SNAPSHOT_MAX_ATTEMPTS", "2"}}, 40s);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(id)) == "sealed/failed");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE outcome = 'failed' AND error LIKE '%exited with code 1%'") ==
          2);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND exit_code = 1") == 4);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'snapshot.gave_up' AND snapshot_id IS NOT NULL "
                  "AND (detail->>'attempts')::int = 2") == 2);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: a snapshot worker that refuses its configuration releases the crawl - no attempt spent",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    const auto q = f.quote(id);
    // Something only the snapshot workers see is wrong (here: their executable
    // says so); they exit 3 before claiming. Each snapshot would otherwise be
    // sealed failed after SNAPSHOT_MAX_ATTEMPTS refusals.
    auto bin = failing_worker_dir(f, 3, "HOOK_PARALLELISM must be a whole number from 1 to 64");
    auto p = f.run(id, {{"ORCH_BIN_DIR", bin.string()}, {"SNAPSHOT_MAX_ATTEMPTS", "1"}}, 40s);
    INFO(p->output());
    CHECK(p->exit_code() == 3);
    CHECK(p->output().find("refused its configuration") != std::string::npos);
    CHECK(f.scalar("SELECT status || '/' || coalesce(outcome, '-') || '/' || (lease_owner IS NULL) FROM crawl "
                   "WHERE id = " + q) == "started/-/true");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q) == 3);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q +
                  " AND status <> 'sealed' AND attempts = 0 AND lease_owner IS NULL AND retry_at <= now()") == 3);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND exit_code = 3") >= 1);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.released' AND crawl_id = " + q +
                  " AND detail->>'reason' = 'configuration refused' AND message LIKE '%orchestrator logs%'") == 1);
    check_nothing_left(f, false);

    // With the worker fixed, the same crawl runs to the end: one attempt each.
    auto fixed = f.run(id, {{"SNAPSHOT_MAX_ATTEMPTS", "1"}}, 40s);
    INFO(fixed->output());
    CHECK(fixed->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded' "
                  "AND attempts = 1") == 3);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: snapshot workers stopped while still starting spend no attempt - the snapshots are due at "
          "once",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(3));
    const auto q = f.quote(id);
    // Workers that are still starting when the stop comes: SIGTERM's default action
    // kills them, as it kills a real snapshot_worker before it blocks the stop
    // signals (the first thing it does). On a busy machine a stop meets such workers.
    auto bin = f.root / "bin-starting";
    auto started = f.root / "started";
    std::filesystem::create_directories(bin);
    std::ofstream(bin / "snapshot_worker") << "#!/bin/sh\necho started >> '" << started.string() << "'\nexec sleep 60\n";
    std::filesystem::permissions(bin / "snapshot_worker", std::filesystem::perms::owner_all);
    auto p = f.start(id, {{"ORCH_BIN_DIR", bin.string()}, {"MAX_SNAPSHOT_WORKERS", "3"}});
    REQUIRE(poll_until([&] { return read_lines(started).size() == 3; }, 30s));
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(30s));
    INFO(p->output());
    CHECK(p->exit_code() == 10);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND term_signal = 15") == 3);
    // Before: a death each, the attempt spent and a second's backoff.
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q +
                  " AND status <> 'sealed' AND attempts = 0 AND lease_owner IS NULL AND retry_at <= now()") == 3);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'snapshot.gave_up'") == 0);
    check_nothing_left(f, false);

    auto again = f.run(id, {{"SNAPSHOT_MAX_ATTEMPTS", "1"}}, 40s);
    INFO(again->output());
    CHECK(again->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded' "
                  "AND attempts = 1") == 3);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: what only its snapshot workers read is checked before the crawl is claimed",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    CrawlEnv env;
    std::string message;
    std::string status = "queued"; // the machine's problem: the crawl stays due
    SECTION("a setting")
    {
        env = {{"HOOK_PARALLELISM", "0"}};
        message = "HOOK_PARALLELISM must be a whole number from 1 to 64, got '0'";
    }
    SECTION("a URL pattern of the crawl's config")
    {
        // `add` refuses it; a crawl row can still get it from elsewhere (SQL, another version).
        // The crawl's own problem: no retry can help, so it is paused.
        f.scalar("UPDATE crawl SET config = '{\"url_deny\": \"([\"}' WHERE id = " + f.quote(id) + " RETURNING 1");
        message = "url_deny";
        status = "paused";
    }
    auto p = f.run(id, env, 40s);
    INFO(p->output());
    CHECK(p->exit_code() == 3);
    CHECK(p->output().find(message) != std::string::npos);
    CHECK(f.scalar("SELECT status || '/' || attempts || '/' || (lease_owner IS NULL) FROM crawl WHERE id = " +
                   f.quote(id)) == status + "/0/true");
    CHECK(f.count("SELECT count(*) FROM snapshot") == 0);
    CHECK(f.count("SELECT count(*) FROM process") == 0);
}

TEST_CASE("crawl_worker: a second SIGTERM skips the grace of a background hook that ignores the first",
          "[crawl_worker][interrupts]")
{
    CrawlFixture f;
    auto ready = f.root / "stubborn.ready";
    auto termed = f.root / "stubborn.term";
    // Ignores SIGTERM (noting that it came), and its timeout (the teardown's
    // grace for it) is two minutes.
    f.write_hook("stubborn", "on_Crawl__05_stubborn.bg.sh",
                 "trap \"echo term >> '" + termed.string() + "'\" TERM\n( trap '' TERM; exec sleep 300 ) &\ntouch '" +
                     ready.string() + "'\nwhile true; do sleep 0.2; done\n");
    std::ofstream(f.plugins / "stubborn" / "config.json") << "{\"timeout\": 120}";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", "sleep 60\n" + succeeded_record("late"));
    auto id = f.add_crawl(CrawlFixture::site_urls(1));
    const auto q = f.quote(id);
    // The fixture caps the teardown grace at 1 s; here it is two minutes. A 3 s
    // lease is renewed every second, also while a teardown blocks.
    auto p = f.start(id, {{"TEARDOWN_GRACE", "120"}, {"LEASE_TTL", "3"}});
    REQUIRE(poll_until([&] { return std::filesystem::exists(ready); }, 30s));
    REQUIRE(poll_until([&] { return f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'") == 1; },
                       30s));
    p->signal(SIGTERM);
    // The first request waits for the stubborn hook's grace. Its teardown began
    // (the hook noted the SIGTERM); then the crawl worker, blocked in that
    // teardown, renewed its lease for 3 s more by the database's clock (each
    // renewal sets the expiry to its now() + 3 s): it had every chance to kill
    // the hook at once, and the hook and the crawl worker still run.
    REQUIRE(poll_until([&] { return !read_lines(termed).empty(); }, 30s));
    const auto expiry_at_term = f.scalar("SELECT lease_expires_at FROM crawl WHERE id = " + q);
    REQUIRE(!expiry_at_term.empty());
    CHECK(poll_until(
        [&] {
            return f.scalar("SELECT lease_expires_at >= " + f.quote(expiry_at_term) +
                            "::timestamptz + interval '3 seconds' FROM crawl WHERE id = " + q) == "t";
        },
        30s));
    CHECK_FALSE(p->wait_for(0ms));
    CHECK(f.scalar("SELECT status FROM process WHERE process_type = 'hook' AND hook_name LIKE '%stubborn%'") ==
          "running");
    // The second request kills it at once (below): what the first did not do.
    auto t0 = Clock::now();
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(20s));
    INFO(p->output());
    CHECK(p->exit_code() == 10);
    CHECK(seconds_since(t0) < 10.0);
    CHECK(f.scalar("SELECT term_signal FROM process WHERE process_type = 'hook' AND hook_name LIKE '%stubborn%'") ==
          "9");
    CHECK(f.rows("SELECT status, lease_owner FROM crawl WHERE id = " + f.quote(id)) ==
          std::vector<std::vector<std::string>>{{"started", ""}});
    check_nothing_left(f, false);
}

TEST_CASE("crawl_worker: a pause lets the running snapshots finish and releases the crawl - resume runs the rest",
          "[crawl_worker][interrupts][pause]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto go = f.root / "go";
    f.write_hook("gated", "on_Snapshot__10_gated.sh", gated_hook(started, go));
    auto id = f.add_crawl(CrawlFixture::site_urls(6));
    const auto q = f.quote(id);
    auto cli = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", f.db.url(),
                                         "--data-dir", f.data.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    };
    // A 3 s lease, renewed every second: a sign of the crawl worker's loop going on.
    auto p = f.start(id, {{"MAX_SNAPSHOT_WORKERS", "2"}, {"LEASE_TTL", "3"}});
    REQUIRE(poll_until([&] { return read_lines(started).size() == 2; }, 30s));

    auto paused = cli({"pause", id, "--reason", "site maintenance"});
    INFO(paused.out << paused.err);
    REQUIRE(paused.exit_code == 0);
    CHECK(paused.out.find("lets the running snapshots finish") != std::string::npos);
    CHECK(cli({"pause", id}).out.find("already paused") != std::string::npos);
    // Draining: nothing new starts, nothing running is stopped, the lease is kept.
    // Judged once the crawl worker saw the pause (it says so) and went on to
    // renew its lease since: a stop of its workers (what a cancellation or a
    // SIGTERM does, in the cases above) would have come before that.
    REQUIRE(poll_until([&] { return p->output().find("crawl paused: letting the running snapshots finish") !=
                                    std::string::npos; },
                       30s));
    const auto expiry_when_seen = f.scalar("SELECT lease_expires_at FROM crawl WHERE id = " + q);
    REQUIRE(!expiry_when_seen.empty());
    REQUIRE(poll_until(
        [&] {
            return f.scalar("SELECT lease_expires_at > " + f.quote(expiry_when_seen) +
                            "::timestamptz FROM crawl WHERE id = " + q) == "t";
        },
        30s));
    CHECK_FALSE(p->wait_for(0ms));
    CHECK(read_lines(started).size() == 2);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'hook' AND status = 'running'") == 2);
    CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NOT NULL) FROM crawl WHERE id = " + q) == "paused/true");

    SECTION("once they finish it is released - and resume runs the rest in a new run")
    {
        std::ofstream(go) << "1";
        REQUIRE(p->wait_for(30s));
        INFO(p->output());
        CHECK(p->exit_code() == 10);
        CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NULL) FROM crawl WHERE id = " + q) == "paused/true");
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded'") == 2);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q +
                      " AND status <> 'sealed' AND attempts = 0 AND lease_owner IS NULL") == 4);
        CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.released' AND detail->>'reason' = 'paused' "
                      "AND crawl_id = " + q) == 1);
        CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.paused' AND actor = 'cli' "
                      "AND message LIKE '%site maintenance%' AND crawl_id = " + q) == 1);
        check_nothing_left(f, false);
        // A worker run by hand on the paused crawl does nothing: interrupted, as
        // when the pause came while it ran (docs/ops.md, exit codes).
        auto idle = f.run(id);
        CHECK(idle->exit_code() == 10);
        CHECK(idle->output().find("paused") != std::string::npos);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status = 'sealed'") == 2);
        // Paused between an orchestrator's claim and its crawl worker's start: the lease goes back.
        const std::string claimed_for = "00000000-0000-4000-8000-00000000c1a1";
        f.exec("UPDATE crawl SET lease_owner = '" + claimed_for + "', lease_expires_at = now() + interval '1 minute' "
               "WHERE id = " + q);
        auto late_argv = f.argv(id);
        late_argv.insert(late_argv.end(), {"--process-id", claimed_for});
        CrawlWorkerProcess late(late_argv, f.env(), f.root / "late.log");
        REQUIRE(late.wait_for(30s));
        CHECK(late.exit_code() == 10);
        CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NULL) FROM crawl WHERE id = " + q) == "paused/true");

        auto resumed = cli({"resume", id});
        INFO(resumed.out << resumed.err);
        CHECK(resumed.exit_code == 0);
        CHECK(f.scalar("SELECT status || '/' || (retry_at <= now()) FROM crawl WHERE id = " + q) == "started/true");
        CHECK(cli({"resume", id}).out.find("not paused") != std::string::npos);
        auto again = f.run(id, {{"MAX_SNAPSHOT_WORKERS", "2"}});
        INFO(again->output());
        CHECK(again->exit_code() == 0);
    }
    SECTION("resumed before it is released - the same run carries on to the end")
    {
        auto resumed = cli({"resume", id});
        INFO(resumed.out << resumed.err);
        CHECK(resumed.exit_code == 0);
        CHECK(resumed.out.find("carries on") != std::string::npos);
        std::ofstream(go) << "1";
        REQUIRE(p->wait_for(30s));
        INFO(p->output());
        CHECK(p->exit_code() == 0);
        CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.released' AND crawl_id = " + q) == 0);
    }
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded' "
                  "AND attempts = 1") == 6);
    CHECK(read_lines(started).size() == 6);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.resumed' AND crawl_id = " + q) == 1);
    check_nothing_left(f);
}

TEST_CASE("crawl_worker: a crawl whose own configuration is refused is paused before it is claimed",
          "[crawl_worker][interrupts][pause]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    const auto q = f.quote(id);
    // A Snapshot plugin's value of the wrong type: each snapshot worker would refuse it.
    // (A URL pattern that does not compile: the test above.)
    f.exec("UPDATE crawl SET config = '{\"plugins\": {\"save\": {\"timeout\": \"soon\"}}}' WHERE id = " + q);
    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 3);
    CHECK(p->output().find("paused") != std::string::npos);
    CHECK(p->output().find("orchestrator resume " + id) != std::string::npos);
    CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NULL) || '/' || attempts FROM crawl WHERE id = " + q) ==
          "paused/true/0");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q) == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE process_type = 'worker'") == 0); // refused before it registered
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.paused' AND crawl_id = " + q +
                  " AND detail->>'reason' = 'configuration refused'") == 1);
    // A machine problem is not the crawl's: the crawl stays due and is not paused.
    f.exec("UPDATE crawl SET status = 'started', retry_at = now(), config = '{}' WHERE id = " + q);
    f.write_config("save", "{not json");
    auto machine = f.run(id);
    INFO(machine->output());
    CHECK(machine->exit_code() == 3);
    CHECK(f.scalar("SELECT status || '/' || (retry_at IS NOT NULL) FROM crawl WHERE id = " + q) == "started/true");
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.paused' AND crawl_id = " + q) == 1);
}

TEST_CASE("crawl_worker: time spent paused does not count against the crawl timeout", "[crawl_worker][interrupts][pause]")
{
    CrawlFixture f;
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "5"});
    const auto q = f.quote(id);
    // Started 10 s ago, paused for the last 9 s of them: it ran 1 s of its 5.
    f.exec("UPDATE crawl SET status = 'paused', started_at = now() - interval '10 seconds', "
           "paused_at = now() - interval '9 seconds' WHERE id = " + q);
    auto resumed = run_command({bin_path("orchestrator").string(), "--database-url", f.db.url(), "--data-dir",
                                f.data.string(), "resume", id});
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(f.scalar("SELECT paused_at IS NULL AND paused_s BETWEEN 8.9 AND 30 FROM crawl WHERE id = " + q) == "t");
    auto shown = run_command({bin_path("orchestrator").string(), "--database-url", f.db.url(), "--data-dir",
                              f.data.string(), "show", "crawl", id});
    CHECK(shown.out.find("not counted against its timeout") != std::string::npos);
    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");

    // The same crawl without the pause would have been over its timeout.
    auto late = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "5"});
    f.exec("UPDATE crawl SET status = 'started', started_at = now() - interval '10 seconds' WHERE id = " +
           f.quote(late));
    auto q2 = f.run(late);
    INFO(q2->output());
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(late)) == "sealed/timed_out");
}

TEST_CASE("crawl_worker: a retried sealed crawl gets its whole timeout again - it runs its snapshots",
          "[crawl_worker][interrupts][retry]")
{
    CrawlFixture f;
    auto fail = f.root / "fail";
    std::ofstream(fail) << "1";
    f.write_hook("save", "on_Snapshot__10_save.sh",
                 "if [ -e '" + fail.string() + "' ] && [ \"$url\" = http://site.test/1 ]; then exit 1; fi\n" +
                     succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "4"});
    const auto q = f.quote(id);
    auto first = f.run(id);
    INFO(first->output());
    REQUIRE(first->exit_code() == 0);
    REQUIRE(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/partial");

    // Past the timeout since the first run started: only a clock restarted by the
    // retry lets the second run do anything before it is sealed timed_out.
    REQUIRE(poll_until([&] {
        return f.scalar("SELECT now() - started_at > interval '4.5 seconds' FROM crawl WHERE id = " + q) == "t";
    }, 30s));
    std::filesystem::remove(fail);
    auto retried = run_command({bin_path("orchestrator").string(), "--database-url", f.db.url(), "--data-dir",
                                f.data.string(), "retry", id});
    INFO(retried.out << retried.err);
    REQUIRE(retried.exit_code == 0);
    // As a crawl that was never started.
    CHECK(f.rows("SELECT status, started_at, paused_at, paused_s, attempts FROM crawl WHERE id = " + q) ==
          std::vector<std::vector<std::string>>{{"queued", "", "", "0", "0"}});

    auto second = f.run(id);
    INFO(second->output());
    CHECK(second->exit_code() == 0);
    CHECK(f.rows("SELECT status, outcome, seal_reason FROM crawl WHERE id = " + q) ==
          std::vector<std::vector<std::string>>{{"sealed", "succeeded", ""}});
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND outcome = 'succeeded'") == 2);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 2);
    CHECK(f.scalar("SELECT now() - started_at < interval '4 seconds' FROM crawl WHERE id = " + q) == "t");
    check_nothing_left(f);
}
