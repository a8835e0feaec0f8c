// The orchestrator interrupted: SIGKILL of the whole tree mid-crawl, then a new
// orchestrator; SIGTERM mid-crawl, then a new orchestrator. Real PostgreSQL and executables.

#include "tests/orchestrator/orch_fixture.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Rows = std::vector<std::vector<std::string>>;

namespace {

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Parent pid and state letter of a process from /proc/<pid>/stat ({0, '?'} if unreadable).
std::pair<pid_t, char> parent_and_state(pid_t pid)
{
    auto stat = read_file_text("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) {
        return {0, '?'};
    }
    std::istringstream fields(stat.substr(close + 2));
    char state = '?';
    pid_t parent = 0;
    fields >> state >> parent;
    return {parent, state};
}

// Live children of `parent` whose command line names `program`, read from /proc
// (the process table lags behind: a worker just spawned may have no running row yet).
std::vector<pid_t> children_named(pid_t parent, const std::string& program)
{
    std::vector<pid_t> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        auto name = entry.path().filename().string();
        if (!std::all_of(name.begin(), name.end(), ::isdigit)) {
            continue;
        }
        pid_t pid = std::stoi(name);
        if (parent_and_state(pid).first == parent && process_alive(pid) &&
            read_file_text(entry.path() / "cmdline").find(program) != std::string::npos) {
            out.push_back(pid);
        }
    }
    return out;
}

// SIGSTOPs `pid` and waits until it is stopped: once it is, it spawns nothing more.
bool freeze(pid_t pid)
{
    ::kill(pid, SIGSTOP);
    return eventually([&] { return parent_and_state(pid).second == 'T'; }, 10s);
}

// SIGKILLs `pids` and waits until none of them is alive (their frozen parent
// cannot reap them: they stay zombies).
bool kill_all(const std::vector<pid_t>& pids)
{
    for (auto pid : pids) {
        ::kill(pid, SIGKILL);
    }
    return eventually([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }, 10s);
}

// Pids of the runs of hook `file` that wrote their marker line ("<pid> <snapshot>")
// to `markers` and are still alive (the command line guards against a reused pid).
std::set<pid_t> live_blocked(const std::filesystem::path& markers, const std::string& file)
{
    std::set<pid_t> out;
    std::istringstream in(read_file_text(markers));
    for (std::string line; std::getline(in, line);) {
        pid_t pid = std::atoi(line.c_str());
        if (pid > 0 && process_alive(pid) &&
            read_file_text("/proc/" + std::to_string(pid) + "/cmdline").find(file) != std::string::npos) {
            out.insert(pid);
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
    auto hold = f.root / "hold";
    auto blocked = f.root / "blocked";
    std::ofstream(slow) << "1";
    std::ofstream(hold) << "1";
    // Hook b blocks on odd URLs while `slow` exists: it writes its pid to `blocked`,
    // then waits while `hold` exists (removed with the temp root at the end; bounded
    // so that a kept root leaks nothing for long). Their snapshot workers are
    // mid-snapshot at the kill.
    f.write_logging_hook("a", "on_Snapshot__10_a.sh", 0.2);
    f.write_logging_hook("b", "on_Snapshot__20_b.sh", 0,
                         "n=${url##*/}\nif [ -e '" + slow.string() + "' ] && (( n % 2 )); then\n"
                         "  echo \"$$ $snap\" >> '" + blocked.string() + "'\n"
                         "  while [ -e '" + hold.string() + "' ] && (( SECONDS < 120 )); do sleep 0.1; done\n"
                         "else sleep 0.2; fi\n");
    auto id = f.add_crawl(OrchFixture::site_urls(30));
    auto q = f.quote(id);
    auto first = f.start({"--max-snapshot-workers", "4"});

    // The kill moment is proven by live processes, not by log lines or rows: at
    // least 3 runs of b that are blocked now (marker written, pid alive).
    REQUIRE(eventually(
        [&] {
            return live_blocked(blocked, "on_Snapshot__20_b.sh").size() >= 3 &&
                   f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + q + " AND status = 'sealed'") >= 2;
        },
        60s));

    // Freeze the tree top-down (nothing spawns meanwhile), then SIGKILL it
    // bottom-up. The order matters: when the parent of a stopped process dies, that
    // process is left in an orphaned process group with a stopped member, and the
    // kernel sends it SIGHUP and SIGCONT (POSIX job control). Killed parent-first, a
    // frozen worker wakes and tears its hooks down gracefully before its own SIGKILL
    // lands, which a loaded machine gives it time to do: no hook is left orphaned.
    std::vector<pid_t> victims = {first->pid()};
    REQUIRE(freeze(first->pid()));
    auto crawl_workers = children_named(first->pid(), "crawl_worker");
    std::vector<pid_t> snapshot_workers;
    for (auto pid : crawl_workers) {
        REQUIRE(freeze(pid));
        for (auto child : children_named(pid, "snapshot_worker")) {
            REQUIRE(freeze(child));
            snapshot_workers.push_back(child);
        }
    }
    REQUIRE(crawl_workers.size() == 1);
    REQUIRE(snapshot_workers.size() >= 3);
    // The hooks that are blocked now are those the kill orphans; each is a child of
    // a frozen snapshot worker, so it is mid-snapshot and its worker is a victim.
    auto blocked_at_kill = live_blocked(blocked, "on_Snapshot__20_b.sh");
    REQUIRE(blocked_at_kill.size() >= 3);
    for (auto pid : blocked_at_kill) {
        INFO("blocked hook " << pid);
        CHECK(std::count(snapshot_workers.begin(), snapshot_workers.end(), parent_and_state(pid).first) == 1);
    }
    REQUIRE(kill_all(snapshot_workers));
    REQUIRE(kill_all(crawl_workers));
    ::kill(first->pid(), SIGKILL);
    REQUIRE(first->wait_for(10s));
    CHECK(first->term_signal() == SIGKILL);
    victims.insert(victims.end(), crawl_workers.begin(), crawl_workers.end());
    victims.insert(victims.end(), snapshot_workers.begin(), snapshot_workers.end());
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
         << orphans.size() << " orphaned hook processes, " << blocked_at_kill.size() << " of them blocked hooks");
    // Every hook blocked at the kill outlived its tree and carries a cookie of the first run.
    for (auto pid : blocked_at_kill) {
        INFO("blocked hook " << pid);
        CHECK(process_alive(pid));
        CHECK(std::count_if(orphans.begin(), orphans.end(), [&](const std::string& line) {
                  return std::atoi(line.c_str()) == pid;
              }) == 1);
    }

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
                  " AND process_type = 'hook' AND end_reason = 'killed_on_recovery'") >=
          static_cast<long>(blocked_at_kill.size()));
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
    // Mid-crawl is proven by live processes: 3 runs of the hook that started and
    // are still alive (a logged start alone may be a run that is already gone).
    auto live_runs = [&] {
        std::set<int> live;
        for (const auto& run : f.hook_runs()) {
            if (!run.end && process_alive(run.pid) &&
                read_file_text("/proc/" + std::to_string(run.pid) + "/cmdline").find("on_Snapshot__10_work.sh") !=
                    std::string::npos) {
                live.insert(run.pid);
            }
        }
        return live;
    };
    REQUIRE(eventually([&] { return live_runs().size() >= 3; }, 60s));
    auto running_at_stop = live_runs();

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
    for (auto pid : running_at_stop) {
        INFO("hook running at the stop: " << pid);
        CHECK_FALSE(process_alive(pid));
    }
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
