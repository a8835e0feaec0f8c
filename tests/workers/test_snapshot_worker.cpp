// snapshot_worker end to end: the real binary, a real PostgreSQL (scratch
// database per test) and hook scripts written by the tests. Interruptions
// (leases, crash, SIGTERM) are in test_snapshot_worker_interrupts.cpp.
#include "tests/workers/worker_fixture.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

using namespace orch::test;
using namespace std::chrono_literals;

namespace {

const std::string k_succeeded = R"({"type":"ArchiveResult","status":"succeeded"})";

// "start a 1700000000.123" lines written by the hooks -> time of each event.
std::map<std::string, double> event_times(const std::filesystem::path& path)
{
    std::map<std::string, double> out;
    for (const auto& line : read_lines(path)) {
        std::istringstream in(line);
        std::string what, who;
        double t = 0;
        in >> what >> who >> t;
        out[what + " " + who] = t;
    }
    return out;
}

// A bash hook that logs its start and end into `events`; with `partner` it waits
// (at most 1.5 s) for the partner hook to have started before ending.
std::string timed_hook(const WorkerFixture& f, const std::string& name, const std::string& partner = {})
{
    auto events = f.file("events").string();
    std::string body = "echo \"start " + name + " $(date +%s.%N)\" >> '" + events + "'\n";
    body += "touch '" + f.file("started_" + name).string() + "'\n";
    if (!partner.empty()) {
        body += "for i in $(seq 15); do [ -e '" + f.file("started_" + partner).string() +
                "' ] && break; sleep 0.1; done\n";
        body += "sleep 0.2\n";
    }
    body += "echo \"end " + name + " $(date +%s.%N)\" >> '" + events + "'\n";
    body += "echo '" + k_succeeded + "'\n";
    return body;
}

void run_parallel_step(WorkerFixture& f, const std::string& parallelism)
{
    auto snap = f.add_simple_snapshot();
    f.write_hook("p", "on_Snapshot__10_a.sh", timed_hook(f, "a", "b"));
    f.write_hook("p", "on_Snapshot__10_b.sh", timed_hook(f, "b", "a"));
    f.write_hook("p", "on_Snapshot__20_c.sh", timed_hook(f, "c"));
    auto w = f.run_worker(snap, {{"HOOK_PARALLELISM", parallelism}});
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    for (const auto& [hook, r] : f.results(snap)) {
        INFO(hook);
        CHECK(r.status == "succeeded");
    }
}

} // namespace

TEST_CASE("snapshot_worker: hooks of two plugins interleave by step - then by name", "[snapshot_worker]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    auto order = f.file("order").string();
    auto hook = [&](const std::string& tag) {
        return "echo " + tag + " >> '" + order + "'\necho '" + k_succeeded + "'\n";
    };
    f.write_hook("alpha", "on_Snapshot__10_first.sh", hook("alpha10"));
    f.write_hook("alpha", "on_Snapshot__30_third.sh", hook("alpha30"));
    f.write_hook("alpha", "on_Snapshot__40_x.sh", hook("alpha40x"));
    f.write_hook("beta", "on_Snapshot__20_second.sh", hook("beta20"));
    f.write_hook("beta", "on_Snapshot__40_a.sh", hook("beta40a"));
    f.write_hook("beta", "on_Crawl__05_not_a_snapshot_hook.sh", hook("crawl"));
    f.write_hook("beta", "helper.sh", hook("helper"));

    auto w = f.run_worker(snap);
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    CHECK(read_lines(order) == std::vector<std::string>{"alpha10", "beta20", "alpha30", "beta40a", "alpha40x"});
    auto results = f.results(snap);
    CHECK(results.size() == 5);
    for (const auto& [name, r] : results) {
        INFO(name);
        CHECK(r.status == "succeeded");
    }
    CHECK(f.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = $1", {snap}) == "sealed/succeeded");
    CHECK(f.scalar("SELECT lease_owner IS NULL FROM snapshot WHERE id = $1", {snap}) == "t");
    // Its log says each hook's start and end once (with the exit), not the
    // supervisor's "launched" and "process exited" as well.
    std::map<std::string, int> lines;
    std::istringstream log(w->err());
    for (std::string line; std::getline(log, line);) {
        for (const std::string what : {" hook started ", " hook finished ", " launched ", " process exited "}) {
            lines[what] += line.find(what) != std::string::npos;
        }
        if (line.find(" hook finished ") != std::string::npos) {
            CHECK_THAT(line, Catch::Contains(" exit_code=0 ") && Catch::Contains(" elapsed_ms="));
        }
    }
    CHECK(lines[" hook started "] == 5);
    CHECK(lines[" hook finished "] == 5);
    CHECK(lines[" launched "] == 0);
    CHECK(lines[" process exited "] == 0);
}

TEST_CASE("snapshot_worker: with HOOK_PARALLELISM=2 a step's hooks overlap - the next step waits", "[snapshot_worker]")
{
    WorkerFixture f;
    run_parallel_step(f, "2");
    auto t = event_times(f.file("events"));
    REQUIRE(t.size() == 6);
    // Both ran at once: each started before the other ended.
    CHECK(t["start a"] < t["end b"]);
    CHECK(t["start b"] < t["end a"]);
    // Step 20 starts only after every step-10 hook ended.
    CHECK(t["start c"] >= std::max(t["end a"], t["end b"]));
}

TEST_CASE("snapshot_worker: with HOOK_PARALLELISM=1 hooks never overlap", "[snapshot_worker]")
{
    WorkerFixture f;
    run_parallel_step(f, "1");
    auto t = event_times(f.file("events"));
    REQUIRE(t.size() == 6);
    CHECK(t["start b"] >= t["end a"]); // a sorts before b
    CHECK(t["start c"] >= t["end b"]);
}

TEST_CASE("snapshot_worker: every status path is recorded and the worker goes on", "[snapshot_worker]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    f.write_config("st", R"({"timeout": 2})");
    auto pids = f.file("timeout_pids").string();
    f.write_hook("st", "on_Snapshot__10_ok.sh", R"(echo data > result.txt
mkdir -p sub && printf 12345 > sub/five.bin
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"all good","output_json":{"n":1}}'
)");
    f.write_hook("st", "on_Snapshot__11_failed_record.sh",
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"failed\",\"error\":\"boom\"}'\nexit 1\n");
    f.write_hook("st", "on_Snapshot__12_failed_exit.sh", "echo 'just a log line'\nexit 3\n");
    f.write_hook("st", "on_Snapshot__13_skipped_record.sh",
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"skipped\",\"error\":\"tool missing\"}'\n");
    f.write_hook("st", "on_Snapshot__14_skipped_exit.sh", "exit 10\n");
    f.write_hook("st", "on_Snapshot__15_noresults.sh", "echo 'nothing to see'\n");
    f.write_hook("st", "on_Snapshot__16_timeout.sh", "sleep 30 &\necho $! >> '" + pids + "'\nwait\n");
    f.write_hook("st", "on_Snapshot__17_timeout_ignores_term.sh",
                 "trap '' TERM\necho $$ >> '" + pids + "'\nwhile :; do sleep 0.1; done\n");
    f.write_hook("st", "on_Snapshot__18_two_records.sh", "echo '" + k_succeeded + "'\necho '" + k_succeeded + "'\n");
    f.write_hook("st", "on_Snapshot__19_garbage.sh", R"(echo 'plain log line'
echo '{not json at all'
echo '{"foo": 1}'
echo '[1, 2, 3]'
echo '{"type": "Unknown", "x": 1}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"despite the noise"}'
echo 'trailing noise'
)");
    f.write_hook("st", "on_Snapshot__20_broken_record.sh", "echo '{\"type\":\"ArchiveResult\",\"status\":'\n");
    f.write_hook("st", "on_Snapshot__21_bad_status.sh", "echo '{\"type\":\"ArchiveResult\",\"status\":\"great\"}'\n");
    f.write_hook("st", "on_Snapshot__30_last.sh", "echo '" + k_succeeded + "'\n");

    auto w = f.run_worker(snap);
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    auto r = f.results(snap);
    REQUIRE(r.size() == 13);

    CHECK(r["on_Snapshot__10_ok.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__10_ok.sh"].output_str == "all good");
    CHECK(r["on_Snapshot__10_ok.sh"].output_json == R"({"n": 1})");
    CHECK(r["on_Snapshot__10_ok.sh"].output_files.find("\"result.txt\"") != std::string::npos);
    CHECK(r["on_Snapshot__10_ok.sh"].output_files.find("\"sub/five.bin\", \"size\": 5") != std::string::npos);
    CHECK(r["on_Snapshot__10_ok.sh"].output_files.find(".log") == std::string::npos);
    CHECK(f.scalar("SELECT output_size FROM archive_result WHERE hook_name = 'st/on_Snapshot__10_ok.sh'") == "10");

    CHECK(r["on_Snapshot__11_failed_record.sh"].status == "failed");
    CHECK(r["on_Snapshot__11_failed_record.sh"].error == "boom");
    CHECK(r["on_Snapshot__12_failed_exit.sh"].status == "failed");
    CHECK_THAT(r["on_Snapshot__12_failed_exit.sh"].error, Catch::Contains("exited with code 3"));
    CHECK(r["on_Snapshot__13_skipped_record.sh"].status == "skipped");
    CHECK(r["on_Snapshot__13_skipped_record.sh"].error == "tool missing");
    CHECK(r["on_Snapshot__14_skipped_exit.sh"].status == "skipped");
    CHECK(r["on_Snapshot__15_noresults.sh"].status == "noresults");
    for (const char* name : {"on_Snapshot__16_timeout.sh", "on_Snapshot__17_timeout_ignores_term.sh"}) {
        INFO(name);
        CHECK(r[name].status == "failed");
        CHECK_THAT(r[name].error, Catch::Contains("timed out after 2"));
    }
    CHECK(r["on_Snapshot__18_two_records.sh"].status == "failed");
    CHECK_THAT(r["on_Snapshot__18_two_records.sh"].error, Catch::Contains("2 ArchiveResult records"));
    CHECK(r["on_Snapshot__19_garbage.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__19_garbage.sh"].output_str == "despite the noise");
    CHECK(r["on_Snapshot__20_broken_record.sh"].status == "failed");
    CHECK_THAT(r["on_Snapshot__20_broken_record.sh"].error, Catch::Contains("invalid JSON"));
    CHECK(r["on_Snapshot__21_bad_status.sh"].status == "failed");
    CHECK_THAT(r["on_Snapshot__21_bad_status.sh"].error, Catch::Contains("status"));
    CHECK(r["on_Snapshot__30_last.sh"].status == "succeeded");

    CHECK(f.scalar("SELECT status || '/' || outcome || '/' || error FROM snapshot WHERE id = $1", {snap}) ==
          "sealed/partial/7 of 13 hooks failed");
    // Each hook has its process row, all ended; the timed-out ones say so.
    CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook' AND status = 'exited'") == "13");
    CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook' AND end_reason = 'timed_out'") == "2");
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE process_id IS NULL OR end_ts IS NULL") == "0");
    // The timed-out hooks and their children are gone from the OS.
    auto left = f.wait_no_leftovers();
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
    for (const auto& pid : read_lines(pids)) {
        INFO(pid);
        CHECK(read_text("/proc/" + pid + "/stat").find(") Z") == std::string::npos);
    }
}

TEST_CASE("snapshot_worker: a non-executable hook and a missing interpreter fail - others still run",
          "[snapshot_worker]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    // PATH with bash only: .js hooks find no node.
    auto bin = f.file("bin");
    std::filesystem::create_directories(bin);
    std::filesystem::create_symlink("/bin/bash", bin / "bash");
    f.write_hook("x", "on_Snapshot__10_noexec.bin", "#!/bin/bash\necho '" + k_succeeded + "'\n", false);
    f.write_hook("x", "on_Snapshot__20_missing_interpreter.js", "console.log('{}')\n");
    f.write_hook("x", "on_Snapshot__30_direct.bin", "#!/bin/bash\necho '" + k_succeeded + "'\n");
    f.write_hook("x", "on_Snapshot__40_after.sh", "echo '" + k_succeeded + "'\n");

    auto w = f.run_worker(snap, {{"PATH", bin.string()}});
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_noexec.bin"].status == "failed");
    CHECK_THAT(r["on_Snapshot__10_noexec.bin"].error, Catch::Contains("not executable"));
    CHECK(r["on_Snapshot__20_missing_interpreter.js"].status == "failed");
    CHECK_THAT(r["on_Snapshot__20_missing_interpreter.js"].error, Catch::Contains("node"));
    CHECK(r["on_Snapshot__30_direct.bin"].status == "succeeded");
    CHECK(r["on_Snapshot__40_after.sh"].status == "succeeded");
    CHECK(f.scalar("SELECT outcome FROM snapshot WHERE id = $1", {snap}) == "partial");
}

TEST_CASE("snapshot_worker: a hook printing 200 MB: the worker survives with flat memory", "[snapshot_worker]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    // 200 MB of log lines, then the record; then 50 MB on a single line.
    f.write_hook("big", "on_Snapshot__10_lines.sh",
                 "yes 'a log line the worker keeps in the log and otherwise ignores, 80 bytes long....' "
                 "| head -c 200000000\n"
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"big\"}'\n");
    f.write_hook("big", "on_Snapshot__20_one_line.sh",
                 "head -c 50000000 /dev/zero | tr '\\0' x\necho\necho '" + k_succeeded + "'\n");
    auto w = f.start_worker(snap);
    bool done = w->wait_for(120s);
    INFO(w->err().substr(0, 4000));
    REQUIRE(done);
    REQUIRE(w->exit_code() == 0);
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_lines.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__10_lines.sh"].output_str == "big");
    CHECK(r["on_Snapshot__20_one_line.sh"].status == "succeeded");
    INFO("worker peak RSS " << w->peak_rss_kb() << " kB");
    CHECK(w->peak_rss_kb() > 0);
    CHECK(w->peak_rss_kb() < 100 * 1024);
    // The log is bounded on disk (HOOK_LOG_MAX_BYTES, 64 MiB by default): the oldest
    // output is punched out while the hook runs; what is left is the recent tail.
    auto log = f.scalar("SELECT stdout_path FROM process WHERE hook_name = 'big/on_Snapshot__10_lines.sh'");
    struct stat st{};
    REQUIRE(::stat(log.c_str(), &st) == 0);
    auto on_disk = static_cast<std::uint64_t>(st.st_blocks) * 512;
    INFO("stdout log " << log << ": " << st.st_size << " bytes written, " << on_disk << " on disk");
    CHECK(static_cast<std::uint64_t>(st.st_size) > 190'000'000u);
    // Checked every 250 ms while the hook writes, and once more when it has exited.
    CHECK(on_disk <= 65u * 1024 * 1024);
}

TEST_CASE("snapshot_worker: background hooks are collected when they exit - torn down with their children at the end",
          "[snapshot_worker]")
{
    auto containment = GENERATE(as<std::string>{}, "", "fallback");
    WorkerFixture f;
    f.containment = containment;
    INFO("containment: " << (containment.empty() ? "probed" : containment));
    auto snap = f.add_simple_snapshot();
    auto pids = f.file("bg_pids").string();
    auto quick_done = f.file("quick_done").string();
    f.write_hook("bg", "on_Snapshot__10_quick.bg.sh",
                 "sleep 0.3\necho '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"quick bg\"}'\n"
                 "touch '" + quick_done + "'\n");
    f.write_hook("bg", "on_Snapshot__10_daemon.bg.sh", "sleep 300 &\necho $! >> '" + pids + "'\n" +
                                                           "( trap '' TERM; sleep 301; true ) &\necho $! >> '" + pids +
                                                           "'\n" +
                                                           R"(bash -c 'trap "" TERM; while :; do sleep 1; done' &
)" + "echo $! >> '" + pids + "'\n" +
                                                           R"(trap 'echo "{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"stopped\"}"; exit 0' TERM
while :; do sleep 0.1; done
)");
    f.write_hook("bg", "on_Snapshot__10_stubborn.bg.sh", "trap '' TERM\nwhile :; do sleep 0.1; done\n");
    // The foreground step waits until the quick background hook has ended by itself.
    f.write_hook("fg", "on_Snapshot__20_wait.sh",
                 "for i in $(seq 100); do [ -e '" + quick_done + "' ] && break; sleep 0.1; done\nsleep 0.3\n"
                 "echo '" + k_succeeded + "'\n");

    auto w = f.run_worker(snap);
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_quick.bg.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__10_quick.bg.sh"].output_str == "quick bg");
    CHECK(f.scalar("SELECT end_reason FROM process WHERE hook_name = 'bg/on_Snapshot__10_quick.bg.sh'") == "exited");
    CHECK(r["on_Snapshot__10_daemon.bg.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__10_daemon.bg.sh"].output_str == "stopped");
    // Ignoring SIGTERM got it SIGKILLed: not a clean stop.
    CHECK(r["on_Snapshot__10_stubborn.bg.sh"].status == "failed");
    CHECK(r["on_Snapshot__20_wait.sh"].status == "succeeded");
    CHECK(f.scalar("SELECT status FROM snapshot WHERE id = $1", {snap}) == "sealed");
    CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook' AND status <> 'exited'") == "0");

    auto left = f.wait_no_leftovers();
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
    auto children = read_lines(pids);
    CHECK(children.size() == 3);
    for (const auto& pid : children) {
        INFO(pid);
        auto stat = read_text("/proc/" + pid + "/stat");
        CHECK((stat.empty() || stat.find(") Z") != std::string::npos));
    }
}

TEST_CASE("snapshot_worker: a foreground hook that exits leaving processes behind keeps its result - the leftovers "
          "are killed at once",
          "[snapshot_worker]")
{
    auto containment = GENERATE(as<std::string>{}, "", "fallback");
    WorkerFixture f;
    f.containment = containment;
    INFO("containment: " << (containment.empty() ? "probed" : containment));
    auto snap = f.add_simple_snapshot();
    // A timeout far above what the run may take: waiting for the leftovers until
    // it fires (the old behaviour) would fail the timing check and the status.
    f.write_config("lv", R"({"timeout": 60})");
    auto pids = f.file("left_pids").string();
    f.write_hook("lv", "on_Snapshot__10_leaves.sh",
                 "sleep 300 &\necho $! >> '" + pids + "'\nsetsid sleep 301 &\necho $! >> '" + pids + "'\n" +
                     "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"left two\"}'\n");
    f.write_hook("lv", "on_Snapshot__20_next.sh", "echo '" + k_succeeded + "'\n");

    const auto t0 = std::chrono::steady_clock::now();
    auto w = f.run_worker(snap);
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took < 30s);
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_leaves.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__10_leaves.sh"].output_str == "left two");
    CHECK(r["on_Snapshot__20_next.sh"].status == "succeeded");
    CHECK(f.scalar("SELECT exit_code::text || ' ' || end_reason FROM process "
                   "WHERE hook_name = 'lv/on_Snapshot__10_leaves.sh'") == "0 exited");
    CHECK(w->err().find("killing leftovers of exited process") != std::string::npos);

    auto left = f.wait_no_leftovers();
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
    auto children = read_lines(pids);
    CHECK(children.size() == 2);
    for (const auto& pid : children) {
        INFO(pid);
        auto stat = read_text("/proc/" + pid + "/stat");
        CHECK((stat.empty() || stat.find(") Z") != std::string::npos));
    }
}

TEST_CASE("snapshot_worker: discovered URLs become child snapshots at depth+1 - filtered and deduplicated",
          "[snapshot_worker]")
{
    WorkerFixture f;
    f.write_hook("disc", "on_Snapshot__10_links.sh", R"HOOK(cat <<'EOF'
{"type":"Snapshot","url":"http://b.test/1","title":"one"}
{"type":"Snapshot","url":"http://b.test/2"}
{"type":"Snapshot","url":"https://b.test/private/3"}
{"type":"Snapshot","url":"http://b.test/1"}
{"type":"Snapshot","url":"HTTP://B.TEST:80/2"}
{"type":"Snapshot","url":"javascript:alert(1)"}
{"type":"Snapshot","url":"ftp://b.test/x"}
{"type":"Snapshot","url":"not a url at all"}
{"type":"Snapshot","url":"http://"}
{"type":"Snapshot","url":"http://a.test/"}
{"type":"ArchiveResult","status":"succeeded"}
EOF
)HOOK");
    auto children = [&](const std::string& crawl) {
        auto conn = f.db.connect();
        pqxx::read_transaction tx(*conn);
        std::vector<std::string> out;
        for (const auto& row : tx.exec_params("SELECT url || ' ' || depth || ' ' || (parent_snapshot_id IS NOT NULL) "
                                              "|| ' ' || status FROM snapshot WHERE crawl_id = $1 AND url <> "
                                              "'http://a.test/' ORDER BY url",
                                              crawl)) {
            out.push_back(row[0].as<std::string>());
        }
        return out;
    };
    auto run = [&](const std::string& snap) {
        auto w = f.run_worker(snap);
        INFO(w->err());
        REQUIRE(w->exit_code() == 0);
        CHECK(f.results(snap)["on_Snapshot__10_links.sh"].status == "succeeded");
        return w->err();
    };

    SECTION("three valid URLs, three children at depth 1; duplicates and invalid URLs dropped with a reason")
    {
        auto crawl = f.add_crawl(1);
        auto snap = f.add_snapshot(crawl, "http://a.test/");
        auto log = run(snap);
        CHECK(children(crawl) == std::vector<std::string>{"http://b.test/1 1 true queued", "http://b.test/2 1 true queued",
                                                         "https://b.test/private/3 1 true queued"});
        CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE parent_snapshot_id = $1", {snap}) == "3");
        CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE crawl_id = $1", {crawl}) == "4");
        CHECK_THAT(log, Catch::Contains("dropped discovered URL"));
        CHECK_THAT(log, Catch::Contains("javascript"));
    }
    SECTION("at the crawl's max depth nothing is added")
    {
        auto crawl = f.add_crawl(1);
        auto snap = f.add_snapshot(crawl, "http://a.test/", 1);
        run(snap);
        CHECK(children(crawl).empty());
    }
    SECTION("max_urls bounds the crawl's snapshots")
    {
        auto crawl = f.add_crawl(3, 3);
        auto snap = f.add_snapshot(crawl, "http://a.test/");
        run(snap);
        CHECK(children(crawl).size() == 2);
        CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE crawl_id = $1", {crawl}) == "3");
    }
    SECTION("url_deny and url_allow patterns of the crawl")
    {
        auto denying = f.add_crawl(1, std::nullopt, R"({"url_deny": "/private/"})");
        run(f.add_snapshot(denying, "http://a.test/"));
        CHECK(children(denying) == std::vector<std::string>{"http://b.test/1 1 true queued", "http://b.test/2 1 true queued"});
        auto allowing = f.add_crawl(1, std::nullopt, R"({"url_allow": ["b\\.test/2$"]})");
        run(f.add_snapshot(allowing, "http://a.test/"));
        CHECK(children(allowing) == std::vector<std::string>{"http://b.test/2 1 true queued"});
    }
    SECTION("a rerun of a sealed parent adds nothing twice")
    {
        auto crawl = f.add_crawl(1);
        auto snap = f.add_snapshot(crawl, "http://a.test/");
        run(snap);
        f.exec("UPDATE snapshot SET status = 'queued', outcome = NULL, retry_at = now() WHERE id = $1", {snap});
        f.exec("UPDATE archive_result SET status = 'queued' WHERE snapshot_id = $1", {snap});
        run(snap);
        CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE crawl_id = $1", {crawl}) == "4");
    }
}

TEST_CASE("snapshot_worker: under max_urls links to URLs the crawl has take no room - new ones are added in page "
          "order up to the limit",
          "[snapshot_worker]")
{
    WorkerFixture f;
    // Two known pages first (a site's menu), then three new ones, not in URL order.
    f.write_hook("disc", "on_Snapshot__10_links.sh", R"HOOK(cat <<'EOF'
{"type":"Snapshot","url":"http://b.test/1"}
{"type":"Snapshot","url":"http://b.test/2"}
{"type":"Snapshot","url":"http://b.test/z"}
{"type":"Snapshot","url":"http://b.test/y"}
{"type":"Snapshot","url":"http://b.test/x"}
{"type":"ArchiveResult","status":"succeeded"}
EOF
)HOOK");
    auto crawl = f.add_crawl(2, 5);
    auto snap = f.add_snapshot(crawl, "http://a.test/");
    f.add_snapshot(crawl, "http://b.test/1", 1);
    f.add_snapshot(crawl, "http://b.test/2", 1);
    auto w = f.run_worker(snap);
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    CHECK(f.results(snap)["on_Snapshot__10_links.sh"].status == "succeeded");
    // Room for 2: the page's first two new URLs, not the two known ones it links first.
    CHECK(f.scalar("SELECT string_agg(url, ' ' ORDER BY url) FROM snapshot WHERE parent_snapshot_id = $1", {snap}) ==
          "http://b.test/y http://b.test/z");
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE crawl_id = $1", {crawl}) == "5");
}

TEST_CASE("snapshot_worker: a URL with shell metacharacters reaches the hook as one argument - no secrets reach it",
          "[snapshot_worker]")
{
    WorkerFixture f;
    auto pwned = f.file("pwned");
    const std::string url = "http://a.test/?q=$(touch " + pwned.string() + ")&x='\"`;|`id`&&$HOME";
    auto crawl = f.add_crawl();
    auto snap = f.add_snapshot(crawl, url);
    auto argv_file = f.file("argv");
    auto env_file = f.file("env");
    auto cwd_file = f.file("cwd");
    f.write_hook("sec", "on_Snapshot__10_dump.sh", "printf '%s\\0' \"$@\" > '" + argv_file.string() + "'\nenv -0 > '" +
                                                       env_file.string() + "'\npwd > '" + cwd_file.string() + "'\n" +
                                                       "echo '" + k_succeeded + "'\n");
    f.write_hook("sec", "on_Snapshot__20_dump.py",
                 "import json, sys\nopen('" + f.file("argv_py").string() +
                     "', 'w').write(json.dumps(sys.argv[1:], separators=(',', ':')))\nprint('" + k_succeeded + "')\n");
    f.write_config("sec", R"({"colour": "red"})");
    const std::string secret = "hunter2-sekrit";
    auto w = f.run_worker(snap, {{"DATABASE_URL", f.db.url() + " password=" + secret},
                                 {"PGPASSWORD", secret},
                                 {"PGAPPNAME", secret},
                                 {"ARCHIVE_PASSWORD", secret},
                                 {"GITHUB_TOKEN", secret},
                                 {"SEC_API_KEY", secret},
                                 {"SEC_PROXY", "http://user:" + secret + "@proxy.test/"},
                                 {"SEC_COLOUR", "blue"}});
    INFO(w->err());
    REQUIRE(w->exit_code() == 0);
    CHECK(f.results(snap)["on_Snapshot__10_dump.sh"].status == "succeeded");

    auto args = read_text(argv_file);
    std::vector<std::string> argv;
    std::istringstream in(args);
    for (std::string a; std::getline(in, a, '\0');) {
        argv.push_back(a);
    }
    CHECK(argv == std::vector<std::string>{"--url=" + url, "--snapshot-id=" + snap, "--crawl-id=" + crawl});
    CHECK(read_text(f.file("argv_py")) == nlohmann::json(argv).dump());
    CHECK_FALSE(std::filesystem::exists(pwned));
    auto snap_dir = (f.data / "snapshots" / snap).string();
    CHECK(read_text(cwd_file) == snap_dir + "/sec\n");

    auto env = "\n" + read_text(env_file);
    std::replace(env.begin(), env.end(), '\0', '\n');
    INFO(env);
    CHECK_THAT(env, Catch::Contains("\nSNAP_DIR=" + snap_dir + "\n"));
    CHECK_THAT(env, Catch::Contains("\nDATA_DIR=" + f.data.string() + "\n"));
    CHECK_THAT(env, Catch::Contains("\nCRAWL_DIR=" + (f.data / "crawls" / crawl).string() + "\n"));
    CHECK_THAT(env, Catch::Contains("SEC_COLOUR=blue"));
    CHECK_THAT(env, !Catch::Contains(secret));
    CHECK_THAT(env, !Catch::Contains("DATABASE_URL"));
    CHECK_THAT(env, !Catch::Contains("\nPG"));
    CHECK_THAT(env, !Catch::Contains("dbname="));
    // Nor in the process rows, nor in the rerun scripts.
    CHECK(f.scalar("SELECT count(*) FROM process WHERE env::text LIKE '%' || $1 || '%' OR cmd::text LIKE '%' || $1 || '%'",
                   {secret}) == "0");
    for (const auto& entry : std::filesystem::recursive_directory_iterator(f.data)) {
        if (entry.is_regular_file()) {
            INFO(entry.path());
            CHECK_THAT(read_text(entry.path()), !Catch::Contains(secret));
        }
    }
}

TEST_CASE("snapshot_worker: unknown or malformed ids fail with distinct codes - a sealed snapshot runs nothing",
          "[snapshot_worker]")
{
    WorkerFixture f;
    auto ran = f.file("ran");
    f.write_hook("p", "on_Snapshot__10_mark.sh", "echo ran >> '" + ran.string() + "'\n");

    auto unknown = f.run_worker("0b6a1f3c-9d7e-4c1a-8f2b-3e4d5c6b7a89");
    CHECK(unknown->exit_code() == 6);
    CHECK_THAT(unknown->err(), Catch::Contains("not found"));
    CHECK_THAT(unknown->err(), Catch::Contains("0b6a1f3c-9d7e-4c1a-8f2b-3e4d5c6b7a89"));

    auto malformed = f.run_worker("not-a-uuid");
    CHECK(malformed->exit_code() == 7);
    CHECK_THAT(malformed->err(), Catch::Contains("not-a-uuid"));

    auto crawl = f.add_crawl();
    auto sealed = f.add_snapshot(crawl, "http://a.test/");
    f.exec("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now() WHERE id = $1", {sealed});
    auto w = f.run_worker(sealed);
    INFO(w->err());
    CHECK(w->exit_code() == 0);
    CHECK_FALSE(std::filesystem::exists(ran));
    CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook'") == "0");
    CHECK(f.scalar("SELECT count(*) FROM archive_result") == "0");
}

TEST_CASE("snapshot_worker: a hook whose output directory cannot be made fails - the others run and it seals",
          "[snapshot_worker]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    auto snap_dir = f.data / "snapshots" / snap;
    std::filesystem::create_directories(snap_dir);
    std::ofstream(snap_dir / "blocked") << "a file where the plugin's directory should be";
    f.write_hook("blocked", "on_Snapshot__10_x.sh", "echo '" + k_succeeded + "'\n");
    f.write_hook("ok", "on_Snapshot__20_y.sh", "echo '" + k_succeeded + "'\n");
    auto w = f.run_worker(snap);
    INFO(w->err());
    CHECK(w->exit_code() == 0);
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_x.sh"].status == "failed");
    CHECK_THAT(r["on_Snapshot__10_x.sh"].error, Catch::Contains("blocked"));
    CHECK(r["on_Snapshot__20_y.sh"].status == "succeeded");
    CHECK(f.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = $1", {snap}) == "sealed/partial");
}

TEST_CASE("snapshot_worker: --continue run by hand is a usage error - nothing is claimed or run", "[snapshot_worker]")
{
    WorkerFixture f;
    auto ran = f.file("ran");
    f.write_hook("p", "on_Snapshot__10_mark.sh", "echo ran >> '" + ran.string() + "'\n");
    auto snap = f.add_simple_snapshot();
    auto argv = f.worker_argv(snap);
    argv.push_back("--continue");
    SpawnedProcess w(argv, f.worker_env());
    REQUIRE(w.wait_for(std::chrono::seconds(60)));
    INFO(w.err());
    CHECK(w.exit_code() == 2);
    CHECK_THAT(w.err(), Catch::Contains("--continue"));
    CHECK_FALSE(std::filesystem::exists(ran));
    CHECK(f.scalar("SELECT status || '/' || attempts || '/' || coalesce(lease_owner::text, '-') FROM snapshot "
                   "WHERE id = $1",
                   {snap}) == "queued/0/-");
    CHECK(f.scalar("SELECT exit_code FROM process WHERE worker_type = 'snapshot'") == "2");
}
