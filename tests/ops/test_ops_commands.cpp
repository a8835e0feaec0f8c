#include "tests/ops/ops_fixture.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

using namespace orch::test;
using namespace orch::test::ops_ids;
using nlohmann::json;

TEST_CASE("ops: status reports a live orchestrator - queues - workers and failures - with LSB exit codes", "[ops]")
{
    OpsTree tree;
    // The journal: a routine event (left out) and two that status shows, newest first.
    tree.exec("INSERT INTO event (kind, actor, os_user, message, crawl_id) VALUES "
              "('crawl.added', 'cli', 'ann', 'crawl added (1 URL)', '" + c1 + "'), "
              "('snapshot.gave_up', 'crawl_worker', 'svc', 'snapshot sealed failed: gave up after 3 attempts', '" + c1 + "'), "
              "('crawl.cancel_requested', 'cli', 'bob', 'cancel requested by operator', '" + c2 + "')");
    auto r = tree.run({"status"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("orchestrator: running on this machine") != std::string::npos);
    CHECK(r.out.find("crawls:    1 queued, 1 started, 0 paused, 0 sealed") != std::string::npos);
    CHECK(r.out.find("snapshots: 1 queued, 1 started, 2 sealed") != std::string::npos);
    CHECK(r.out.find("1 crawl_worker, 1 hook, 1 snapshot_worker") != std::string::npos);
    CHECK(r.out.find(h2) != std::string::npos);          // the killed hook
    CHECK(r.out.find("fatal: boom") != std::string::npos); // its stderr tail
    CHECK(r.out.find(sw2) != std::string::npos);         // the snapshot worker that exited 1
    CHECK(r.out.find("recent events (24h)") != std::string::npos);
    CHECK(r.out.find("cancel requested by operator") != std::string::npos);
    CHECK(r.out.find("cli (bob)") != std::string::npos);
    CHECK(r.out.find("crawl added") == std::string::npos);
    // c1 is being run (c2 is only queued): its progress, 2 of 3 sealed, one of them failed.
    CHECK(r.out.find("active crawls:") != std::string::npos);
    CHECK(r.out.find(c1 + "  started  2/3     1       0.4/min") != std::string::npos);
    CHECK(r.out.find(c2 + "  ") == std::string::npos);

    auto j = tree.run({"status", "--json"});
    REQUIRE(j.exit_code == 0);
    auto doc = json::parse(j.out);
    CHECK(doc["state"] == "running");
    CHECK(doc["orchestrators"].size() == 1);
    CHECK(doc["orchestrators"][0]["this_machine"] == true);
    CHECK(doc["queues"]["snapshot"]["sealed"] == 2);
    CHECK(doc["running"]["hook"] == 1);
    REQUIRE(doc["recent_failures"].size() == 2);
    CHECK(doc["recent_failures"][0]["id"] == sw2); // newest first
    CHECK(doc["recent_failures"][0]["outcome"] == "failed");
    CHECK(doc["recent_failures"][0]["exit_code"] == 1);
    CHECK(doc["recent_failures"][1]["id"] == h2);
    CHECK(doc["recent_failures"][1]["outcome"] == "timed_out");
    CHECK(doc["recent_failures"][1]["signal"] == 9);
    REQUIRE(doc["recent_events"].size() == 2);
    CHECK(doc["recent_events"][0]["kind"] == "crawl.cancel_requested");
    CHECK(doc["recent_events"][0]["os_user"] == "bob");
    CHECK(doc["recent_events"][1]["kind"] == "snapshot.gave_up");
    CHECK(doc["recent_events"][1]["crawl_id"] == c1);
    REQUIRE(doc["active_crawls"].size() == 1);
    CHECK(doc["active_crawls"][0]["id"] == c1);
    CHECK(doc["active_crawls"][0]["sealed"] == 2);
    CHECK(doc["active_crawls"][0]["snapshots"] == 3);
    CHECK(doc["active_crawls"][0]["eta_s"].get<double>() == Approx(150).margin(10));

    // A row that says running but names another process (start time differs): 1.
    tree.exec("UPDATE process SET start_ticks = start_ticks + 1 WHERE id = '" + orchestrator + "'");
    auto stale = tree.run({"status", "--json"});
    CHECK(stale.exit_code == 1);
    CHECK(json::parse(stale.out)["state"] == "dead");
    // No row: 3.
    tree.exec("UPDATE process SET status = 'exited', ended_at = now() WHERE id = '" + orchestrator + "'");
    auto none = tree.run({"status"});
    CHECK(none.exit_code == 3);
    CHECK(none.out.find("orchestrator: not running") != std::string::npos);
    // Database unreachable: 4.
    auto down = run_command({bin_path("orchestrator").string(), "status", "--database-url",
                             "host=/nonexistent-orch dbname=x", "--data-dir", tree.dir().string()});
    CHECK(down.exit_code == 4);
    CHECK(down.err.find("cannot connect to PostgreSQL") != std::string::npos);
}

TEST_CASE("ops: ps prints the live tree in order - --all adds exited rows - --crawl-id filters", "[ops]")
{
    OpsTree tree;
    // Not a terminal: JSON lines by default.
    auto r = tree.run({"ps"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto rows = lines_of(r.out);
    REQUIRE(rows.size() == 4);
    std::vector<std::string> ids;
    for (const auto& line : rows) {
        ids.push_back(json::parse(line)["id"]);
    }
    CHECK(ids == std::vector<std::string>{orchestrator, crawl_worker, sw3, h3});
    auto hook = json::parse(rows[3]);
    CHECK(hook["depth"] == 3);
    CHECK(hook["type"] == "hook");
    CHECK(hook["path"] == json::array({orchestrator, crawl_worker, sw3, h3}));
    CHECK(hook["root_id"] == orchestrator);
    CHECK(hook["pid"] == 999007);
    CHECK(hook["hook_name"] == "on_Snapshot__10_title");

    // The CPU the reaper recorded (none for the others here).
    tree.exec("UPDATE process SET cpu_user_s = 1.25, cpu_system_s = 0.5 WHERE id = '" + h2 + "'");
    auto all = tree.run({"ps", "--all", "--json"});
    REQUIRE(all.exit_code == 0);
    ids.clear();
    for (const auto& line : lines_of(all.out)) {
        ids.push_back(json::parse(line)["id"]);
    }
    CHECK(ids == std::vector<std::string>{orchestrator, crawl_worker, sw1, h1, sw2, h2, sw3, h3});
    auto killed = json::parse(lines_of(all.out)[5]);
    CHECK(killed["outcome"] == "timed_out");
    CHECK(killed["term_signal"] == 9);
    CHECK(killed["signal_name"] == "SIGKILL");
    CHECK(killed["exit_code"] == 137);
    CHECK(killed["cpu_s"] == 1.75);
    CHECK(json::parse(lines_of(all.out)[4])["cpu_s"].is_null());

    auto text = tree.run({"ps", "--all", "--text"});
    INFO(text.out);
    REQUIRE(text.exit_code == 0);
    auto lines = lines_of(text.out);
    REQUIRE(lines.size() == 9);
    CHECK(lines[0].rfind("TYPE", 0) == 0);
    CHECK(lines[1].rfind("orchestrator ", 0) == 0);
    CHECK(lines[2].rfind("`-crawl_worker ", 0) == 0);
    CHECK(lines[6].rfind("    `-hook ", 0) == 0);
    CHECK(lines[6].find("exited/timed_out") != std::string::npos);
    CHECK(lines[6].find("SIGKILL") != std::string::npos);
    CHECK(lines[6].find(" 1.75s ") != std::string::npos);
    CHECK(lines[0].find(" CPU ") != std::string::npos);
    CHECK(lines[6].find("wget/on_Snapshot__50_wget") != std::string::npos);

    // --state keeps the rows in those states, in tree order; exited ones imply --all.
    auto ids_of = [](const std::string& out) {
        std::vector<std::string> found;
        for (const auto& line : lines_of(out)) {
            found.push_back(json::parse(line)["id"]);
        }
        return found;
    };
    CHECK(ids_of(tree.run({"ps", "--state", "exited", "--json"}).out) == std::vector<std::string>{sw1, h1, sw2, h2});
    CHECK(ids_of(tree.run({"ps", "--state", "queued", "--state", "running", "--json"}).out) ==
          ids_of(tree.run({"ps", "--json"}).out));
    auto bad_state = tree.run({"ps", "--state", "sleeping"});
    CHECK(bad_state.exit_code == 2);
    CHECK(bad_state.err.find("--state") != std::string::npos);

    auto crawl = tree.run({"ps", "--crawl-id", c1, "--json"});
    REQUIRE(crawl.exit_code == 0);
    CHECK(lines_of(crawl.out).size() == 3); // the crawl worker and below; not the orchestrator
    CHECK(tree.run({"ps", "--crawl-id", c2, "--json"}).out.empty());
    auto bad = tree.run({"ps", "--crawl-id", "nope"});
    CHECK(bad.exit_code == 7);
    CHECK(bad.err.find("not a valid id") != std::string::npos);
}

TEST_CASE("ops: ps --since shows what was alive in the window - in its trees - whatever the ancestors' age", "[ops]")
{
    OpsTree tree;
    // sw1 and its hook ended three days ago, sw2 and its hook ten minutes ago; the
    // crawl worker (an ancestor of all) ended three days ago; sw3 and h3 run.
    tree.exec("UPDATE process SET ended_at = now() - interval '3 days' WHERE id IN ('" + sw1 + "', '" + h1 + "')");
    tree.exec("UPDATE process SET ended_at = now() - interval '10 minutes' WHERE id IN ('" + sw2 + "', '" + h2 + "')");
    tree.exec("UPDATE process SET status = 'exited', ended_at = now() - interval '3 days' WHERE id = '" +
              crawl_worker + "'");
    auto ids_of = [](const std::string& out) {
        std::vector<std::string> ids;
        for (const auto& line : lines_of(out)) {
            ids.push_back(json::parse(line)["id"]);
        }
        return ids;
    };
    auto recent = tree.run({"ps", "--since", "1h", "--json"});
    INFO(recent.err);
    REQUIRE(recent.exit_code == 0);
    CHECK(ids_of(recent.out) == std::vector<std::string>{orchestrator, crawl_worker, sw2, h2, sw3, h3});
    CHECK(json::parse(lines_of(recent.out)[3])["path"] == json::array({orchestrator, crawl_worker, sw2, h2}));
    // A window that covers everything is the whole history, in the same order.
    CHECK(ids_of(tree.run({"ps", "--since", "1w", "--json"}).out) ==
          ids_of(tree.run({"ps", "--all", "--json"}).out));
    // The crawl worker holds c1: it and everything below it in the window.
    CHECK(ids_of(tree.run({"ps", "--since", "1h", "--crawl-id", c1, "--json"}).out) ==
          std::vector<std::string>{crawl_worker, sw2, h2, sw3, h3});

    auto text = tree.run({"ps", "--since", "1h", "--text"});
    REQUIRE(text.exit_code == 0);
    CHECK(lines_of(text.out).size() == 7); // and the header

    for (const char* bad : {"0m", "5x", "-1h", "h"}) {
        auto r = tree.run({"ps", "--since", bad});
        CHECK(r.exit_code == 7);
        CHECK(r.err.find("--since '" + std::string(bad) + "'") != std::string::npos);
    }
}

TEST_CASE("ops: ps --all streams a history larger than one fetch - in tree order - as JSON lines and as a table", "[ops]")
{
    OpsTree tree;
    // 2,500 exited roots after the fixture's 8 rows: three fetches of the cursor.
    tree.exec("INSERT INTO process (machine_id, process_type, status, pid, exit_code, end_reason, started_at, ended_at, "
              " created_at) "
              "SELECT '" + tree.machine_id() + "', 'hook', 'exited', g, 0, 'exited', now(), now(), "
              " now() + g * interval '1 ms' FROM generate_series(1, 2500) g");
    auto all = tree.run({"ps", "--all", "--json"});
    REQUIRE(all.exit_code == 0);
    const auto rows = lines_of(all.out);
    REQUIRE(rows.size() == 2508);
    std::vector<int> pids;
    for (std::size_t i = 8; i < rows.size(); ++i) {
        pids.push_back(json::parse(rows[i])["pid"].get<int>());
    }
    CHECK(std::is_sorted(pids.begin(), pids.end()));
    CHECK(pids.front() == 1);
    CHECK(pids.back() == 2500);
    auto text = tree.run({"ps", "--all", "--text"});
    REQUIRE(text.exit_code == 0);
    CHECK(lines_of(text.out).size() == 2509); // and the header
}

TEST_CASE("ops: logs prints a log - its last lines - the stored tail of a gone file - and follows", "[ops]")
{
    OpsTree tree;
    auto r = tree.run({"logs", h2, "--stderr"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "line 1\nline 2\nline 3\nwarning: slow\nfatal: boom\n");
    auto tail = tree.run({"logs", h2, "--stderr", "-n", "2"});
    CHECK(tail.out == "warning: slow\nfatal: boom\n");
    auto gone = tree.run({"logs", h1});
    CHECK(gone.exit_code == 0);
    CHECK(gone.out == "saved index.html\n");
    CHECK(gone.err.find("tail stored in its row") != std::string::npos);
    auto none = tree.run({"logs", sw1});
    CHECK(none.exit_code == 6);
    CHECK(none.err.find("has no stdout log recorded") != std::string::npos);
    CHECK(tree.run({"logs", "00000000-0000-4000-8000-00000000ffff"}).exit_code == 6);
    CHECK(tree.run({"logs", "12"}).exit_code == 7);

    SpawnedProcess follow({bin_path("orchestrator").string(), "logs", h3, "--follow", "--database-url", tree.db().url(),
                           "--data-dir", (tree.dir() / "data").string()});
    REQUIRE(eventually([&] { return follow.out() == "title: start\n"; }, std::chrono::seconds(10)));
    std::ofstream(tree.dir() / "h3.stdout.log", std::ios::app) << "title: done\n";
    REQUIRE(eventually([&] { return follow.out() == "title: start\ntitle: done\n"; }, std::chrono::seconds(10)));
    CHECK_FALSE(follow.exited());
    tree.exec("UPDATE process SET status = 'exited', exit_code = 0, ended_at = now() WHERE id = '" + h3 + "'");
    REQUIRE(follow.wait_for(std::chrono::seconds(10)));
    CHECK(follow.exit_code() == 0);
}

TEST_CASE("ops: show crawl and show snapshot with per-hook results - text and JSON - and id errors", "[ops]")
{
    OpsTree tree;
    auto r = tree.run({"show", "crawl", c1});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("status    started") != std::string::npos);
    CHECK(r.out.find("snapshots 3 total: 0 queued, 1 started, 2 sealed (1 succeeded") != std::string::npos);
    CHECK(r.out.find("on_Snapshot__50_wget") != std::string::npos);
    CHECK(r.out.find("boom") != std::string::npos);

    auto j = json::parse(tree.run({"show", "crawl", c1, "--json"}).out);
    CHECK(j["snapshots"]["total"] == 3);
    CHECK(j["snapshots"]["failed"] == 1);
    // Started 5 minutes ago, 2 sealed since, 1 to go.
    CHECK(j["rate_per_min"].get<double>() == Approx(0.4).epsilon(0.05));
    CHECK(j["avg_rate_per_min"].get<double>() == Approx(0.4).epsilon(0.05));
    CHECK(j["running_s"].get<double>() == Approx(300).margin(10));
    CHECK(j["eta_s"].get<double>() == Approx(150).margin(10));
    CHECK(r.out.find("rate      0.4/min in its last 10 min, 0.4/min on average over 5m") != std::string::npos);
    CHECK(r.out.find("; eta 2m") != std::string::npos);
    REQUIRE(j["hooks"].size() == 2);
    CHECK(j["hooks"][1]["hook_name"] == "on_Snapshot__50_wget");
    CHECK(j["hooks"][1]["failed"] == 1);
    CHECK(j["hooks"][1]["last_error"] == "boom");

    CHECK_FALSE(j.contains("hosts")); // no per-host rules
    // With per-host rules: its hosts' running and waiting snapshots (s3 runs on a.test).
    tree.exec("UPDATE crawl SET max_per_host = 2 WHERE id = '" + c1 + "'");
    auto ruled = json::parse(tree.run({"show", "crawl", c1, "--json"}).out);
    REQUIRE(ruled["hosts"].size() == 1);
    CHECK(ruled["hosts"][0]["host"] == "a.test");
    CHECK(ruled["hosts"][0]["running"] == 1);
    CHECK(ruled["hosts"][0]["waiting"] == 0);
    auto ruled_text = tree.run({"show", "crawl", c1}).out;
    CHECK(ruled_text.find("per host  at most 2 snapshot(s) at once") != std::string::npos);
    CHECK(ruled_text.find("a.test  1        0        -") != std::string::npos);

    // The CPU its process (h2, on s2) had when it was reaped.
    tree.exec("UPDATE archive_result SET process_id = '" + h2 + "' WHERE snapshot_id = '" + s2 +
              "' AND hook_name = 'on_Snapshot__50_wget'");
    tree.exec("UPDATE process SET cpu_user_s = 0.2, cpu_system_s = 0.05 WHERE id = '" + h2 + "'");
    auto s = json::parse(tree.run({"show", "snapshot", s2, "--json"}).out);
    CHECK(s["outcome"] == "failed");
    REQUIRE(s["hooks"].size() == 2);
    CHECK(s["hooks"][1]["status"] == "failed");
    CHECK(s["hooks"][1]["error"] == "boom");
    CHECK(s["hooks"][1]["duration_s"].get<double>() == Approx(29).margin(0.5));
    CHECK(s["hooks"][1]["cpu_s"].get<double>() == Approx(0.25));
    auto st = tree.run({"show", "snapshot", s2});
    CHECK(st.out.find("status    sealed (failed)") != std::string::npos);
    CHECK(st.out.find(" 250.0ms ") != std::string::npos);

    auto missing = tree.run({"show", "snapshot", c1});
    CHECK(missing.exit_code == 6);
    CHECK(missing.err.find("snapshot " + c1 + " not found") != std::string::npos);
    CHECK(tree.run({"show", "crawl", "x"}).exit_code == 7);
    CHECK(tree.run({"show", "thing", c1}).exit_code == 2);
}

TEST_CASE("ops: crawls lists the newest first with snapshot counts - filters - JSON lines and a table", "[ops]")
{
    OpsTree tree;
    tree.exec("UPDATE crawl SET label = 'nightly', tags = '{news,fr}', urls = '{http://a.test/,http://a.test/2}', "
              "created_at = now() - interval '3 hours' WHERE id = '" + c1 + "'");
    auto ids = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"crawls", "--json"});
        auto r = tree.run(args);
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        std::vector<std::string> out;
        for (const auto& line : lines_of(r.out)) {
            out.push_back(json::parse(line)["id"].get<std::string>());
        }
        return out;
    };
    using Ids = std::vector<std::string>;

    auto all = tree.run({"crawls"}); // not a terminal: JSON lines
    REQUIRE(all.exit_code == 0);
    auto lines = lines_of(all.out);
    REQUIRE(lines.size() == 2);
    auto newest = json::parse(lines[0]);
    auto older = json::parse(lines[1]);
    CHECK(newest["id"] == c2);
    CHECK(newest["status"] == "queued");
    CHECK(newest["snapshots"] == 1);
    CHECK(newest["sealed"] == 0);
    CHECK(older["id"] == c1);
    CHECK(older["label"] == "nightly");
    CHECK(older["urls"] == 2);
    CHECK(older["lease_owner"] == crawl_worker);
    CHECK(older["snapshots"] == 3);
    CHECK(older["sealed"] == 2);
    CHECK(older["succeeded"] == 1);
    CHECK(older["paused_s"] == 0);
    CHECK(older["paused_at"].is_null());

    CHECK(ids({"--status", "started"}) == Ids{c1});
    CHECK(ids({"--status", "queued", "--status", "started"}) == Ids{c2, c1});
    CHECK(ids({"--outcome", "failed"}).empty());
    CHECK(ids({"--label", "nightly"}) == Ids{c1});
    CHECK(ids({"--tag", "news"}) == Ids{c1});
    CHECK(ids({"--tag", "news", "--tag", "de"}).empty());
    CHECK(ids({"--since", "1h"}) == Ids{c2});
    CHECK(ids({"-n", "1"}) == Ids{c2});

    auto table = tree.run({"crawls", "--text"});
    INFO(table.out);
    REQUIRE(table.exit_code == 0);
    CHECK(table.out.rfind("CRAWL", 0) == 0);
    CHECK(table.out.find(c1 + "  started") != std::string::npos);
    CHECK(table.out.find("2/3") != std::string::npos);
    CHECK(table.out.find("http://a.test/ (+1)") != std::string::npos);
    CHECK(tree.run({"crawls", "--text", "--status", "paused"}).out == "no crawls\n");

    CHECK(tree.run({"crawls", "--since", "5x"}).exit_code == 7);
    CHECK(tree.run({"crawls", "--status", "bogus"}).exit_code == 2);
}

TEST_CASE("ops: crawl_progress rates a young - a paused - a sealed and a re-run crawl over the time it ran", "[ops]")
{
    OpsTree tree;
    // Each figure of c1 (2 of its 3 snapshots sealed) after `sql`.
    auto progress = [&](const std::string& sql) {
        tree.exec(sql);
        return json::parse(tree.scalar("SELECT json_build_object('rate', rate_per_min, 'avg', avg_rate_per_min,"
                                       " 'running_s', running_s, 'eta_s', extract(epoch FROM eta))::text"
                                       " FROM ops.crawl_progress WHERE crawl_id = '" + c1 + "'"));
    };
    auto seal_times = [&](const std::string& first, const std::string& second) {
        return "UPDATE snapshot SET sealed_at = CASE id WHEN '" + s1 + "' THEN now() - interval '" + first +
               "' ELSE now() - interval '" + second + "' END WHERE id IN ('" + s1 + "', '" + s2 + "')";
    };

    // Running for 30 s, 2 sealed: 4 a minute, not 2 per 10 minutes; the last one in 15 s.
    tree.exec(seal_times("20 seconds", "10 seconds"));
    auto young = progress("UPDATE crawl SET started_at = now() - interval '30 seconds' WHERE id = '" + c1 + "'");
    CHECK(young["rate"].get<double>() == Approx(4).epsilon(0.05));
    CHECK(young["avg"].get<double>() == Approx(4).epsilon(0.05));
    CHECK(young["eta_s"].get<double>() == Approx(15).margin(1));

    // Paused for the last 10 s (and 5 s before): no ETA, and 15 s of running.
    auto paused = progress("UPDATE crawl SET status = 'paused', paused_at = now() - interval '10 seconds',"
                           " paused_s = 5 WHERE id = '" + c1 + "'");
    CHECK(paused["eta_s"].is_null());
    CHECK(paused["running_s"].get<double>() == Approx(15).margin(1));
    CHECK(paused["avg"].get<double>() == Approx(8).epsilon(0.1));

    // Sealed an hour ago after an hour's run: no recent rate, its average, no time left.
    tree.exec(seal_times("90 minutes", "61 minutes"));
    auto sealed = progress("UPDATE crawl SET status = 'sealed', outcome = 'partial', paused_at = NULL, paused_s = 0,"
                           " started_at = now() - interval '2 hours', sealed_at = now() - interval '1 hour',"
                           " lease_owner = NULL, lease_expires_at = NULL WHERE id = '" + c1 + "'");
    CHECK(sealed["rate"].get<double>() == 0);
    CHECK(sealed["running_s"].get<double>() == Approx(3600).margin(1));
    CHECK(sealed["avg"].get<double>() == Approx(2.0 / 60).epsilon(0.01));
    CHECK(sealed["eta_s"].get<double>() == 0);

    // Sealed 20 s after its start 5 s ago: the rate of those 20 s.
    tree.exec(seal_times("10 seconds", "6 seconds"));
    auto quick = progress("UPDATE crawl SET started_at = now() - interval '25 seconds',"
                          " sealed_at = now() - interval '5 seconds' WHERE id = '" + c1 + "'");
    CHECK(quick["rate"].get<double>() == Approx(6).epsilon(0.05));

    // Run again a minute ago (s3 queued again): what was sealed before the new start is not its rate.
    tree.exec(seal_times("3 minutes", "30 seconds"));
    auto rerun = progress("UPDATE crawl SET status = 'started', outcome = NULL, sealed_at = NULL,"
                          " started_at = now() - interval '1 minute' WHERE id = '" + c1 + "'");
    CHECK(rerun["rate"].get<double>() == Approx(1).epsilon(0.05));
    CHECK(rerun["eta_s"].get<double>() == Approx(60).margin(2));
}

TEST_CASE("ops: read-only commands with an external database create no data directory", "[ops]")
{
    OpsTree tree;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"crawls", "--json"}, {"ps", "--json"}, {"events", "--json"}, {"status", "--json"}}) {
        INFO(args.front());
        auto r = tree.run(args);
        INFO(r.out << r.err);
        CHECK(r.exit_code != 2);
        CHECK(r.err.find("error") == std::string::npos);
        CHECK_FALSE(std::filesystem::exists(tree.dir() / "data"));
    }
}
