// The orchestrator interrupted: SIGKILL of the whole tree mid-crawl, then a new
// orchestrator; SIGTERM mid-crawl, then a new orchestrator. Real PostgreSQL and executables.

#include "tests/orchestrator/orch_fixture.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Rows = std::vector<std::vector<std::string>>;

namespace {

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Live worker pids recorded in running process rows whose command line names `program`.
std::vector<pid_t> running_workers(OrchFixture& f, const std::string& program)
{
    std::vector<pid_t> out;
    for (const auto& row : f.rows("SELECT pid FROM process WHERE process_type = 'worker' AND status = 'running'")) {
        pid_t pid = std::stoi(row[0]);
        if (process_alive(pid) &&
            read_file_text("/proc/" + row[0] + "/cmdline").find(program) != std::string::npos) {
            out.push_back(pid);
        }
    }
    return out;
}

std::map<std::string, int> starts_per_hook(const std::vector<HookRun>& runs)
{
    std::map<std::string, int> out;
    for (const auto& run : runs) {
        ++out[run.snapshot + " " + run.hook];
    }
    return out;
}

} // namespace

TEST_CASE("orchestrator: after a SIGKILL of the whole tree mid-crawl - a new orchestrator finishes without rerunning "
          "succeeded hooks",
          "[orchestrator][recovery]")
{
    OrchFixture f;
    auto slow = f.root / "slow";
    std::ofstream(slow) << "1";
    // Hook b hangs on odd URLs while `slow` exists: their snapshot workers are mid-snapshot at the kill.
    f.write_logging_hook("a", "on_Snapshot__10_a.sh", 0.2);
    f.write_logging_hook("b", "on_Snapshot__20_b.sh", 0,
                         "n=${url##*/}\nif [ -e '" + slow.string() + "' ] && (( n % 2 )); then sleep 30; "
                         "else sleep 0.2; fi\n");
    auto id = f.add_crawl(OrchFixture::site_urls(30));
    auto q = f.quote(id);
    auto first = f.start({"--max-snapshot-workers", "4"});

    auto hung_b = [&] {
        int n = 0;
        for (const auto& run : f.hook_runs()) {
            n += run.hook == "b" && !run.end ? 1 : 0;
        }
        return n;
    };
    REQUIRE(eventually(
        [&] {
            return hung_b() >= 3 &&
                   f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status = 'sealed'") >= 2;
        },
        60s));

    // Freeze the tree top-down (nothing spawns meanwhile), then SIGKILL it; hooks are left orphaned.
    std::vector<pid_t> victims = {first->pid()};
    ::kill(first->pid(), SIGSTOP);
    for (auto pid : running_workers(f, "crawl_worker")) {
        ::kill(pid, SIGSTOP);
        victims.push_back(pid);
    }
    for (auto pid : running_workers(f, "snapshot_worker")) {
        ::kill(pid, SIGSTOP);
        victims.push_back(pid);
    }
    for (auto pid : victims) {
        ::kill(pid, SIGKILL);
    }
    REQUIRE(first->wait_for(10s));
    CHECK(first->term_signal() == SIGKILL);
    REQUIRE(victims.size() >= 4); // orchestrator, crawl worker, snapshot workers
    REQUIRE(eventually([&] { return std::none_of(victims.begin(), victims.end(), process_alive); }, 10s));

    // What the first run left: its rows, the hooks that succeeded, orphans still running.
    std::string first_ids;
    for (const auto& row : f.rows("SELECT id FROM process")) {
        first_ids += (first_ids.empty() ? "'" : ", '") + row[0] + "'";
    }
    auto first_rows = "id IN (" + first_ids + ")";
    std::set<std::string> succeeded;
    for (const auto& row : f.rows("SELECT snapshot_id, plugin FROM archive_result WHERE status = 'succeeded'")) {
        succeeded.insert(row[0] + " " + row[1]);
    }
    auto starts_at_kill = starts_per_hook(f.hook_runs());
    auto orphans = f.our_processes(first_rows, false);
    MEASURE("at the kill: " << succeeded.size() << " hooks succeeded, "
         << f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed'") << " snapshots sealed, "
         << orphans.size() << " orphaned hook processes");
    CHECK(orphans.size() >= 3);

    std::filesystem::remove(slow);
    auto t0 = Clock::now();
    auto second = f.run({"--max-snapshot-workers", "4"});
    INFO(describe(*second));
    CHECK(second->exit_code() == 0);
    MEASURE("the new orchestrator finished the crawl in " << seconds_since(t0) << " s");

    CHECK(f.rows("SELECT status, outcome FROM crawl WHERE id = " + q) == Rows{{"sealed", "succeeded"}});
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND outcome = 'succeeded'") == 30);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 60);
    auto starts = starts_per_hook(f.hook_runs());
    CHECK(starts.size() == 60);
    for (const auto& key : succeeded) {
        INFO("succeeded before the kill: " << key);
        CHECK(starts[key] == starts_at_kill[key]);
        CHECK(starts[key] == 1);
    }
    // Nothing of the first run survived it (its orphans were torn down, not left to finish).
    auto left = f.our_processes(first_rows, false);
    INFO("left: " << (left.empty() ? "" : left.front()));
    CHECK(left.empty());
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE " + first_rows +
                  " AND process_type = 'hook' AND end_reason = 'killed_on_recovery'") >= 3);
    CHECK(overlapping_process_rows(f, "worker_type = 'snapshot'", "snapshot_id") == 0);
    CHECK(overlapping_process_rows(f, "process_type = 'hook'", "snapshot_id::text || hook_name") == 0);
    CHECK(overlapping_hook_runs(f.hook_runs()) == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("orchestrator: SIGTERM mid-crawl ends every process within the bound and the next orchestrator finishes",
          "[orchestrator][recovery]")
{
    // One-shot: stopped before its work was done, exit 10 (interrupted). Daemon:
    // running until stopped is its job, exit 0 (systemd's clean stop).
    const bool daemon = GENERATE(false, true);
    INFO((daemon ? "daemon" : "one-shot"));
    const int expected_exit = daemon ? 0 : 10;
    OrchFixture f;
    auto slow = f.root / "slow";
    std::ofstream(slow) << "1";
    f.write_logging_hook("work", "on_Snapshot__10_work.sh", 0,
                         "if [ -e '" + slow.string() + "' ]; then sleep 30; else sleep 0.1; fi\n");
    auto id = f.add_crawl(OrchFixture::site_urls(10));
    auto q = f.quote(id);
    std::vector<std::string> options = {"--stop-grace", "5", "--max-snapshot-workers", "3"};
    if (daemon) {
        options.push_back("--daemon");
    }
    auto p = f.start(options);
    REQUIRE(eventually([&] { return f.hook_runs().size() >= 3; }, 60s));

    auto t0 = Clock::now();
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(30s));
    double stop_s = seconds_since(t0);
    INFO(describe(*p));
    MEASURE("SIGTERM -> orchestrator exited in " << stop_s << " s (stop grace 5 s, teardown grace 1 s)");
    CHECK(p->exit_code() == expected_exit);
    CHECK(f.scalar("SELECT exit_code FROM process WHERE process_type = 'orchestrator'") ==
          std::to_string(expected_exit));
    CHECK(f.scalar("SELECT detail->>'exit_code' FROM event WHERE kind = 'orchestrator.stopped'") ==
          std::to_string(expected_exit));
    CHECK(stop_s < 8.0);
    auto left = f.our_processes();
    INFO("left: " << (left.empty() ? "" : left.front()));
    CHECK(left.empty());
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited' OR ended_at IS NULL") == 0);
    CHECK(f.rows("SELECT status, coalesce(outcome, ''), coalesce(lease_owner::text, '') FROM crawl WHERE id = " +
                 q) == Rows{{"started", "", ""}});
    CHECK(f.count("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL OR status = 'sealed'") == 0);
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'started'") == 0);
    CHECK(f.rows("SELECT exit_code::text FROM process WHERE worker_type = 'crawl'") == Rows{{"10"}});

    std::filesystem::remove(slow);
    auto again = f.run();
    INFO(describe(*again));
    CHECK(again->exit_code() == 0);
    CHECK(f.rows("SELECT status, outcome FROM crawl WHERE id = " + q) == Rows{{"sealed", "succeeded"}});
    CHECK(f.count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 10);
    CHECK(overlapping_hook_runs(f.hook_runs()) == 0);
    CHECK(f.wait_no_leftovers().empty());
}
