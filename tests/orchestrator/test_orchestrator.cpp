// The orchestrator end to end: real PostgreSQL, the real orchestrator,
// crawl_worker and snapshot_worker executables, bash hooks written by the tests.

#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/row_history.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Rows = std::vector<std::vector<std::string>>;

namespace {

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

} // namespace

TEST_CASE("orchestrator: one-shot processes three crawls with discovery and records the tree and exits 0",
          "[orchestrator]")
{
    OrchFixture f;
    f.write_logging_hook("links", "on_Snapshot__10_links.sh", 0,
                         "printf '{\"type\":\"Snapshot\",\"url\":\"%s/a\"}\\n' \"$url\"\n");
    std::vector<std::string> crawls;
    for (int i = 1; i <= 3; ++i) {
        crawls.push_back(f.add_crawl(OrchFixture::site_urls(2, "http://c" + std::to_string(i) + ".test/"),
                                     {"--depth", "1"}));
    }

    auto t0 = Clock::now();
    auto p = f.run();
    INFO(describe(*p));
    CHECK(p->exit_code() == 0);
    MEASURE("one-shot run of 3 crawls (12 snapshots): " << seconds_since(t0) << " s");

    for (const auto& id : crawls) {
        auto q = f.quote(id);
        CHECK(f.rows("SELECT status, outcome, coalesce(lease_owner::text, '') FROM crawl WHERE id = " + q) ==
              Rows{{"sealed", "succeeded", ""}});
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q +
                      " AND status = 'sealed' AND outcome = 'succeeded'") == 4);
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND depth = 1") == 2);
    }
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE plugin = 'links' AND status = 'succeeded'") == 12);
    CHECK(f.hook_runs().size() == 12);

    // orchestrator -> crawl_worker -> snapshot_worker -> hook.
    auto orch = f.rows("SELECT id, exit_code, pid FROM process WHERE process_type = 'orchestrator'");
    REQUIRE(orch.size() == 1);
    CHECK(orch[0][1] == "0");
    CHECK(orch[0][2] == std::to_string(p->pid()));
    auto levels = f.rows("WITH RECURSIVE t(id, depth) AS ("
                         "  SELECT id, 0 FROM process WHERE id = " + f.quote(orch[0][0]) +
                         "  UNION ALL SELECT p.id, t.depth + 1 FROM process p JOIN t ON p.parent_id = t.id) "
                         "SELECT depth, count(*) FROM t GROUP BY depth ORDER BY depth");
    // Snapshot workers take one snapshot after another: at least one per crawl, never
    // more than a crawl has snapshots.
    const auto workers = f.count("SELECT count(*) FROM process WHERE worker_type = 'snapshot'");
    CHECK(workers >= 3);
    CHECK(workers <= 12);
    CHECK(levels == Rows{{"0", "1"}, {"1", "3"}, {"2", std::to_string(workers)}, {"3", "12"}});
    CHECK(f.count("SELECT count(*) FROM process") == 1 + 3 + workers + 12);
    CHECK(f.count("SELECT count(*) FROM process w JOIN process o ON o.id = w.parent_id "
                  "WHERE w.worker_type = 'crawl' AND o.process_type = 'orchestrator'") == 3);
    CHECK(f.count("SELECT count(DISTINCT crawl_id) FROM process WHERE worker_type = 'crawl'") == 3);
    CHECK(f.count("SELECT count(*) FROM process s JOIN process c ON c.id = s.parent_id "
                  "WHERE s.worker_type = 'snapshot' AND c.worker_type = 'crawl' AND s.crawl_id = c.crawl_id") == workers);
    // Each hook hangs under a snapshot worker of its own crawl.
    CHECK(f.count("SELECT count(*) FROM process h JOIN process s ON s.id = h.parent_id "
                  "WHERE h.process_type = 'hook' AND s.worker_type = 'snapshot' AND h.crawl_id = s.crawl_id") == 12);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited' OR exit_code IS DISTINCT FROM 0") == 0);
    auto left = f.wait_no_leftovers();
    INFO("left: " << (left.empty() ? "" : left.front()));
    CHECK(left.empty());
}

TEST_CASE("orchestrator: the idle daemon starts an added crawl at once and uses no CPU and exits 0 on SIGTERM",
          "[orchestrator]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    // Every write to the process rows, with the server's clock: what woke the
    // daemon is read from them and from its log (below).
    record_row_history(f.db.url(), "process");
    // No safety-net poll within the test: the daemon's only timed wake-ups are
    // then its heartbeat (every 10 s, a write to its own row) and its recovery
    // pass (every 15 s, a debug line of its log).
    auto d = f.start({"--daemon", "--poll-interval", "3600", "--log-level", "debug"});
    REQUIRE(f.wait_registered(d->pid()));
    // Settled: no CPU used for a while (start-up recovery done, LISTENing).
    double last = -1;
    REQUIRE(eventually(
        [&] {
            double now = cpu_seconds(d->pid());
            bool settled = now == last;
            last = now;
            std::this_thread::sleep_for(300ms);
            return settled;
        },
        10s));

    auto t0 = Clock::now();
    auto id = f.add_crawl({"http://latency.test/"});
    double add_s = seconds_since(t0);
    auto q = f.quote(id);
    // The crawl worker's row (snapshot workers' rows carry the crawl id too, and
    // may already exist: the whole crawl can be sealed before the first poll).
    bool started = eventually(
        [&] {
            return f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + q +
                           " AND snapshot_id IS NULL AND started_at IS NOT NULL") == 1;
        },
        30s);
    double wall_s = seconds_since(t0);
    INFO(describe(*d));
    REQUIRE(started);
    double db_ms = std::stod(f.scalar("SELECT extract(epoch FROM p.started_at - c.created_at) * 1000 FROM process p "
                                      "JOIN crawl c ON c.id = p.crawl_id WHERE p.process_type = 'worker' "
                                      "AND p.snapshot_id IS NULL AND c.id = " + q));
    MEASURE("daemon latency: crawl row inserted -> crawl_worker started " << db_ms << " ms (database clock); "
         << "`orchestrator add` launched -> worker row seen " << wall_s * 1000 << " ms, of which the add command "
         << add_s * 1000 << " ms");
    // At once: the crawl's insert (its NOTIFY) woke the daemon, not a timer. A
    // timed wake-up leaves a trace before the loop claims (the heartbeat writes
    // the daemon's row, the recovery pass logs a line): none came between the
    // crawl's insert and the insert of its crawl worker's row.
    const std::string launch_window =
        "(SELECT c.created_at AS since, (SELECT min(at) FROM test_row_history WHERE tbl = 'process' "
        "   AND op = 'INSERT' AND new->>'process_type' = 'worker' AND new->>'crawl_id' = " + q + ") AS until "
        " FROM crawl c WHERE c.id = " + q + ") w";
    const auto heartbeats = [&](const std::string& window) {
        return f.count("SELECT count(*) FROM test_row_history h, " + window +
                       " WHERE h.tbl = 'process' AND h.op = 'UPDATE' AND h.new->>'process_type' = 'orchestrator' "
                       " AND h.new->>'heartbeat_at' IS DISTINCT FROM h.old->>'heartbeat_at' "
                       " AND h.at > w.since AND h.at < w.until");
    };
    // The times of the daemon's recovery passes, from its log lines ("<ISO time> debug ... recovery pass").
    const auto recovery_passes = [&](const std::string& window) {
        std::string times = "ARRAY[]::timestamptz[]";
        std::istringstream lines(d->err());
        for (std::string line; std::getline(lines, line);) {
            if (line.find(" recovery pass") != std::string::npos && line.find(' ') != std::string::npos) {
                times = "array_append(" + times + ", " + f.quote(line.substr(0, line.find(' '))) + "::timestamptz)";
            }
        }
        return f.count("SELECT count(*) FROM unnest(" + times + ") t, " + window + " WHERE t > w.since AND t < w.until");
    };
    CHECK(heartbeats(launch_window) == 0);
    CHECK(recovery_passes(launch_window) == 0);
    REQUIRE(eventually([&] { return f.scalar("SELECT status FROM crawl WHERE id = " + q) == "sealed"; }, 30s));
    REQUIRE(eventually(
        [&] { return f.count("SELECT count(*) FROM process WHERE status <> 'exited' AND pid <> " +
                             std::to_string(d->pid())) == 0; },
        10s));

    // Idle CPU over 5 s.
    double cpu0 = cpu_seconds(d->pid());
    std::this_thread::sleep_for(5s);
    double idle_cpu = cpu_seconds(d->pid()) - cpu0;
    MEASURE("daemon CPU time over 5 idle seconds: " << idle_cpu << " s");
    CHECK(idle_cpu < 0.5);
    // The same traces do show the timed wake-ups when they come: a heartbeat
    // and a recovery pass after the crawl's start.
    const std::string since_launch = "(SELECT (SELECT min(at) FROM test_row_history WHERE tbl = 'process' "
                                     "   AND op = 'INSERT' AND new->>'process_type' = 'worker' AND new->>'crawl_id' = " +
                                     q + ") AS since, 'infinity'::timestamptz AS until) w";
    CHECK(eventually([&] { return heartbeats(since_launch) > 0 && recovery_passes(since_launch) > 0; }, 40s));

    t0 = Clock::now();
    d->signal(SIGTERM);
    REQUIRE(d->wait_for(10s));
    INFO(describe(*d));
    CHECK(d->exit_code() == 0);
    CHECK(seconds_since(t0) < 5.0);
    CHECK(f.rows("SELECT status, exit_code FROM process WHERE process_type = 'orchestrator'") == Rows{{"exited", "0"}});
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: an unreachable database exits 4 with a clear message", "[orchestrator]")
{
    OrchFixture f;
    auto p = std::make_unique<SpawnedProcess>(
        std::vector<std::string>{bin_path("orchestrator").string(), "--database-url",
                                 "host=/nonexistent-orch-test port=5999 user=nobody dbname=none connect_timeout=2",
                                 "--data-dir", f.data.string(), "--machine-id", "machine-a"},
        f.env());
    REQUIRE(p->wait_for(30s));
    INFO(describe(*p));
    CHECK(p->exit_code() == 4);
    CHECK_THAT(p->err(), Catch::Contains("nonexistent-orch-test") || Catch::Contains("connect"));
}

namespace {

// ORCH_BIN_DIR for an orchestrator whose crawl_worker fails at start (exit 1,
// as a worker that cannot start would) for `bad_crawl` only, and is the real one
// for every other crawl.
std::filesystem::path failing_crawl_worker_dir(OrchFixture& f, const std::string& bad_crawl)
{
    auto dir = f.root.path() / "bin-failing-crawl-worker";
    std::filesystem::create_directories(dir);
    auto exe = dir / "crawl_worker";
    std::ofstream(exe) << "#!/bin/sh\ncase \" $* \" in *\" " << bad_crawl
                       << " \"*) echo 'crawl_worker: error: cannot start' >&2; exit 1;; esac\nexec '"
                       << bin_path("crawl_worker").string() << "' \"$@\"\n";
    std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
    std::filesystem::create_symlink(bin_path("snapshot_worker"), dir / "snapshot_worker");
    return dir;
}

} // namespace

TEST_CASE("orchestrator: a crawl whose worker keeps failing is retried with growing backoff - no hot loop",
          "[orchestrator][backoff]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    auto bad = f.add_crawl({"http://bad-worker.test/"});
    auto worker_rows = [&] {
        return f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + f.quote(bad));
    };
    auto d = f.start({"--daemon"}, "machine-a", std::nullopt,
                     {{"ORCH_BIN_DIR", failing_crawl_worker_dir(f, bad).string()}});
    REQUIRE(f.wait_registered(d->pid()));
    REQUIRE(eventually([&] { return worker_rows() >= 1; }, 10s));
    auto good = f.add_crawl({"http://good.test/"});
    REQUIRE(eventually([&] { return f.scalar("SELECT status FROM crawl WHERE id = " + f.quote(good)) == "sealed"; },
                       30s));
    std::this_thread::sleep_for(8s);
    // Backoff 2 s, 4 s, 8 s...: at most 4 attempts in the first ~10 s (a hot loop made hundreds).
    auto spawned = worker_rows();
    MEASURE("failing crawl: " << spawned << " crawl_worker spawns in ~10 s of daemon time");
    CHECK(spawned >= 2);
    CHECK(spawned <= 4);
    CHECK(f.scalar("SELECT status <> 'sealed' AND lease_owner IS NULL AND retry_at > now() FROM crawl "
                   "WHERE id = " + f.quote(bad)) == "t");
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.backed_off' AND crawl_id = " + f.quote(bad)) ==
          spawned);
    d->signal(SIGTERM);
    REQUIRE(d->wait_for(10s));
    CHECK(d->exit_code() == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: a one-shot run that leaves a crawl unfinished because its worker failed exits 1 naming it",
          "[orchestrator][backoff]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    auto bad = f.add_crawl({"http://bad-worker.test/"});
    auto good = f.add_crawl({"http://good.test/"});
    const auto sealed = [&](const std::string& crawl) {
        return f.scalar("SELECT status || '/' || coalesce(outcome, '') FROM crawl WHERE id = " + f.quote(crawl));
    };
    SECTION("a worker that always fails: retried within the idle window, then the run says so")
    {
        auto p = f.start({}, "machine-a", std::nullopt, {{"ORCH_BIN_DIR", failing_crawl_worker_dir(f, bad).string()}});
        REQUIRE(p->wait_for(60s));
        INFO(describe(*p));
        // Before: exit 0, "nothing due", with the crawl backing off unfinished.
        CHECK(p->exit_code() == 1);
        // Backoff 2 s then 4 s: one retry fits the 2 s idle window (more if the
        // other crawl ran long), each one journaled.
        auto failures = f.count("SELECT count(*) FROM event WHERE kind = 'crawl.backed_off' AND crawl_id = " +
                                f.quote(bad));
        CHECK(failures >= 2);
        CHECK_THAT(p->err(), Catch::Contains("1 crawl(s) left unfinished") &&
                                 Catch::Contains("crawl " + bad + " (its crawl worker failed " +
                                                 std::to_string(failures) + " time(s); due again at 20"));
        const auto& err = p->err();
        auto at = err.find("left unfinished");
        REQUIRE(at != std::string::npos);
        CHECK(err.substr(at, err.find('\n', at) - at).find(good) == std::string::npos);
        CHECK(sealed(good) == "sealed/succeeded");
        CHECK(f.scalar("SELECT status IN ('queued', 'started') AND lease_owner IS NULL AND retry_at > now() "
                       "FROM crawl WHERE id = " + f.quote(bad)) == "t");
        CHECK(f.wait_no_leftovers().empty());
    }
    SECTION("a worker that fails once: its retry in the same run seals the crawl, and the run exits 0")
    {
        auto dir = f.root.path() / "bin-fails-once";
        std::filesystem::create_directories(dir);
        auto marker = f.root.path() / "failed-once";
        std::ofstream(dir / "crawl_worker") << "#!/bin/sh\nif [ ! -e '" << marker.string() << "' ]; then touch '"
                                            << marker.string() << "'; echo 'crawl_worker: error: transient' >&2; "
                                            << "exit 1; fi\nexec '" << bin_path("crawl_worker").string()
                                            << "' \"$@\"\n";
        std::filesystem::permissions(dir / "crawl_worker", std::filesystem::perms::owner_all);
        std::filesystem::create_symlink(bin_path("snapshot_worker"), dir / "snapshot_worker");
        auto p = f.start({}, "machine-a", std::nullopt, {{"ORCH_BIN_DIR", dir.string()}});
        REQUIRE(p->wait_for(60s));
        INFO(describe(*p));
        CHECK(std::filesystem::exists(marker));
        CHECK(p->exit_code() == 0);
        CHECK(sealed(bad) == "sealed/succeeded");
        CHECK(sealed(good) == "sealed/succeeded");
        CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.backed_off'") == 1);
    }
}

TEST_CASE("orchestrator: a crawl worker that fails after its claim gives the crawl back with a backoff - no hot loop",
          "[orchestrator][backoff]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    auto bad = f.add_crawl({"http://bad-dir.test/"});
    // The real crawl worker claims the crawl, then cannot make its directory (a
    // file is in the way, under the data directory this wrapper gives it) and
    // gives the crawl back itself before exiting 1.
    auto blocked = f.root.path() / "blocked-data";
    std::filesystem::create_directories(blocked / "crawls");
    std::ofstream(blocked / "crawls" / bad) << "not a directory";
    auto dir = f.root.path() / "bin-blocked-crawl-worker";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "crawl_worker") << "#!/bin/bash\nargs=()\nwhile [ $# -gt 0 ]; do\n"
                                        << "  if [ \"$1\" = --data-dir ]; then args+=(--data-dir '" << blocked.string()
                                        << "'); shift 2; else args+=(\"$1\"); shift; fi\ndone\nexec '"
                                        << bin_path("crawl_worker").string() << "' \"${args[@]}\"\n";
    std::filesystem::permissions(dir / "crawl_worker", std::filesystem::perms::owner_all);
    std::filesystem::create_symlink(bin_path("snapshot_worker"), dir / "snapshot_worker");
    auto worker_rows = [&] {
        return f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + f.quote(bad));
    };
    auto d = f.start({"--daemon"}, "machine-a", std::nullopt, {{"ORCH_BIN_DIR", dir.string()}});
    REQUIRE(f.wait_registered(d->pid()));
    REQUIRE(eventually([&] { return worker_rows() >= 1; }, 10s));
    std::this_thread::sleep_for(8s);
    // Released due at once, it was claimed again before its worker was even
    // reaped: dozens of workers in these seconds.
    auto spawned = worker_rows();
    MEASURE("crawl failing after its claim: " << spawned << " crawl_worker spawns in ~8 s of daemon time");
    CHECK(spawned >= 2);
    CHECK(spawned <= 4);
    CHECK(f.scalar("SELECT attempts FROM crawl WHERE id = " + f.quote(bad)) == std::to_string(spawned));
    CHECK(f.scalar("SELECT status <> 'sealed' AND lease_owner IS NULL AND retry_at > now() FROM crawl "
                   "WHERE id = " + f.quote(bad)) == "t");
    d->signal(SIGTERM);
    REQUIRE(d->wait_for(10s));
    CHECK(d->exit_code() == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: a crawl whose own configuration is refused is paused - not retried - and resumes once fixed",
          "[orchestrator][backoff]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    auto bad = f.add_crawl({"http://bad-config.test/"});
    const auto q = f.quote(bad);
    // Valid when the orchestrator starts (it checks plugin config with no crawl
    // config), refused by the crawl worker: a wrong type in this crawl's config,
    // written past `add`'s own check.
    f.exec("UPDATE crawl SET config = '{\"plugins\": {\"quick\": {\"timeout\": \"soon\"}}}' WHERE id = " + q);
    auto good = f.add_crawl({"http://good.test/"});
    auto worker_rows = [&] {
        return f.count("SELECT count(*) FROM process WHERE process_type = 'worker' AND crawl_id = " + q);
    };
    auto paused_event = [&] {
        return f.count("SELECT count(*) FROM event WHERE kind = 'crawl.paused' AND actor = 'crawl_worker' "
                       "AND detail->>'reason' = 'configuration refused' AND message LIKE '%timeout%' "
                       "AND crawl_id = " + q);
    };

    SECTION("a one-shot run runs the other crawls and ends with exit 3 naming it")
    {
        auto p = f.start();
        REQUIRE(p->wait_for(60s));
        INFO(describe(*p));
        CHECK(p->exit_code() == 3);
        CHECK(p->err().find(bad) != std::string::npos);
        CHECK(p->err().find("paused") != std::string::npos);
        CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + f.quote(good)) ==
              "sealed/succeeded");
    }
    SECTION("a daemon pauses it after one try and keeps serving")
    {
        auto d = f.start({"--daemon"});
        REQUIRE(f.wait_registered(d->pid()));
        REQUIRE(eventually([&] { return f.scalar("SELECT status FROM crawl WHERE id = " + f.quote(good)) == "sealed"; },
                           30s));
        REQUIRE(eventually([&] { return paused_event() == 1; }, 30s));
        // The daemon took its worker's exit and decided: it says so.
        REQUIRE(eventually(
            [&] { return d->err().find("crawl paused: its configuration is refused") != std::string::npos; }, 30s));
        // A retry would be due 2 s after that exit (failure_backoff(1)). A crawl
        // due 3 s from now is claimed only when the retry would have been due
        // too (due crawls are claimed in due order): once it is sealed, the
        // daemon had its chance to retry. The sibling cases above show the
        // retry's crawl.backed_off event and its second worker when it does.
        const auto later = f.scalar("INSERT INTO crawl (urls, retry_at) VALUES (ARRAY['http://later.test/'], "
                                    "now() + interval '3 seconds') RETURNING id");
        REQUIRE(eventually(
            [&] { return f.scalar("SELECT status FROM crawl WHERE id = " + f.quote(later)) == "sealed"; }, 60s));
        d->signal(SIGTERM);
        REQUIRE(d->wait_for(10s));
        CHECK(d->exit_code() == 0);
        CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'crawl.backed_off' AND crawl_id = " + q) == 0);
    }
    CHECK(worker_rows() == 1);
    CHECK(paused_event() == 1);
    CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NULL) || '/' || attempts FROM crawl WHERE id = " + q) ==
          "paused/true/0");
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q) == 0);

    // Still paused, a later run leaves it alone; fixed and resumed, it runs.
    auto idle = f.run();
    CHECK(idle->exit_code() == 0);
    CHECK(worker_rows() == 1);
    f.exec("UPDATE crawl SET config = '{}' WHERE id = " + q);
    auto resumed = run_command({bin_path("orchestrator").string(), "--database-url", f.db.url(), "--data-dir",
                                f.data.string(), "resume", bad});
    INFO(resumed.out << resumed.err);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.out.find("resumed") != std::string::npos);
    auto again = f.run();
    INFO(describe(*again));
    CHECK(again->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/succeeded");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: logs of a hook whose output outgrew HOOK_LOG_MAX_BYTES prints the kept part - says how much "
          "was discarded - no zeros",
          "[orchestrator][logs]")
{
    OrchFixture f;
    // About 960 kB on stdout and on stderr, against a 64 KiB bound: the hook's
    // supervisor deallocates all but the newest 32 KiB or so of each log.
    const std::string record = R"({"type":"ArchiveResult","status":"succeeded","output_str":"chatty"})";
    f.write_hook("chatty", "on_Snapshot__10_chatty.sh",
                 "for i in $(seq 1 20000); do printf 'out line %05d of a hook that says far too much\\n' $i; done\n"
                 "for i in $(seq 1 20000); do printf 'err line %05d of a hook that says far too much\\n' $i >&2; done\n"
                 "echo '" + record + "'\n");
    f.add_crawl({"http://chatty.test/"});
    auto p = f.start({}, "machine-a", std::nullopt, {{"HOOK_LOG_MAX_BYTES", "65536"}});
    REQUIRE(p->wait_for(120s));
    INFO(describe(*p));
    REQUIRE(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || ' ' || output_str FROM archive_result") == "succeeded chatty");
    const auto id = f.scalar("SELECT id FROM process WHERE hook_name = 'chatty/on_Snapshot__10_chatty.sh'");
    REQUIRE(id.size() == 36);
    auto logs = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "logs", id, "--database-url", f.db.url(),
                                         "--data-dir", f.data.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    };
    auto ends_with = [](const std::string& text, const std::string& end) {
        return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
    };

    for (const char* stream : {"stdout", "stderr"}) {
        INFO(stream);
        const bool err = std::string(stream) == "stderr";
        const auto path = f.scalar(std::string("SELECT ") + stream + "_path FROM process WHERE id = " + f.quote(id));
        const auto size = std::filesystem::file_size(path);
        REQUIRE(size > 900'000);
        const std::vector<std::string> which = err ? std::vector<std::string>{"--stderr"} : std::vector<std::string>{};
        const std::string last = err ? "err line 20000 of a hook that says far too much\n"
                                     : "out line 20000 of a hook that says far too much\n" + record + "\n";

        auto all = logs(which);
        INFO(all.err);
        REQUIRE(all.exit_code == 0);
        CHECK(all.out.find('\0') == std::string::npos);
        CHECK(all.out.size() >= 16 * 1024);
        CHECK(all.out.size() <= 64 * 1024);
        CHECK(ends_with(all.out, last));
        // What it printed and what it said was discarded make up the file.
        CHECK_THAT(all.err, Catch::Contains("[" + std::to_string(size - all.out.size()) + " bytes of older " + stream +
                                            " output discarded"));

        // -n within the kept part: the last lines, nothing to say.
        auto args = which;
        args.insert(args.end(), {"-n", err ? "1" : "2"});
        auto tail = logs(args);
        CHECK(tail.exit_code == 0);
        CHECK(tail.out == last);
        CHECK(tail.err.empty());
        // -n reaching past it: the kept part, and how much is gone.
        args = which;
        args.insert(args.end(), {"-n", "100000"});
        auto deep = logs(args);
        CHECK(deep.exit_code == 0);
        CHECK(deep.out == all.out);
        CHECK(deep.err == all.err);

        // The tail stored in the row is the end of the kept output.
        const auto stored = f.scalar(std::string("SELECT ") + stream + "_tail FROM process WHERE id = " + f.quote(id));
        CHECK(ends_with(stored, last));
        CHECK(stored.find('?') == std::string::npos);
    }
}
