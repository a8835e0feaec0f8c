#include "tests/supervision/supervision_fixture.hpp"
#include "tests/support/skip_test.hpp"

#include "common/supervision/file_tail.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/base/random_id.hpp"

#include <catch2/catch.hpp>

#include <fstream>

#include <poll.h>
#include <sys/stat.h>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

TEST_CASE("a foreground hook is recorded: exit code - tails - env - cmd.sh", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    auto req = fx.request({"sh", "-c", "echo out-$ORCH_PROCESS_COOKIE; echo db=$DATABASE_URL; echo err >&2; exit 3"});
    req.env["DATABASE_URL"] = "postgres://secret";
    req.env["API_TOKEN"] = "hunter2";
    const auto launched = sup.launch(req);
    REQUIRE(launched.started());
    const auto outcome = sup.wait(launched.row_id, 20s);
    CHECK(outcome.exit_code == 3);
    CHECK_FALSE(outcome.term_signal);
    CHECK(fx.column(launched.row_id, "status") == "exited");
    CHECK(fx.column(launched.row_id, "exit_code") == "3");
    CHECK(fx.column(launched.row_id, "end_reason") == "exited");
    const auto cookie = fx.column(launched.row_id, "cookie");
    CHECK(fx.column(launched.row_id, "stdout_tail") == "out-" + cookie + "\ndb=\n");
    CHECK(fx.column(launched.row_id, "stderr_tail") == "err\n");
    CHECK(fx.column(launched.row_id, "pid") == std::to_string(launched.pid));
    CHECK(fx.column(launched.row_id, "pgid") == std::to_string(launched.pid));
    CHECK_FALSE(fx.column(launched.row_id, "start_ticks").empty());
    CHECK(fx.column(launched.row_id, "parent_id") == sup.self_row_id());
    const auto env = fx.column(launched.row_id, "env");
    CHECK(env.find("postgres://secret") == std::string::npos);
    CHECK(env.find("hunter2") == std::string::npos);
    const auto script = fx.dir / "logs" / ("hook." + launched.row_id + ".cmd.sh");
    REQUIRE(std::filesystem::exists(script));
    const auto text = read_file_tail(script, 100000);
    CHECK(text.find("hunter2") == std::string::npos);
    CHECK(text.find("'echo out-$ORCH_PROCESS_COOKIE;") != std::string::npos);
    CHECK(zombie_children() == 0);
}

TEST_CASE("a reaped process's row has its CPU time with its reaped children's - the supervisor's own row too",
          "[supervisor]")
{
    SupervisionFixture fx;
    std::string self;
    {
        Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
        self = sup.self_row_id();
        // Two children and itself, 0.1 s of CPU each by their own clocks.
        const auto spinner = sup.launch(fx.request({program_path("sup_spinner").string(), "0.1", "2"}));
        REQUIRE(spinner.started());
        CHECK(sup.wait(spinner.row_id, 20s).exit_code == 0);
        const auto idle = sup.launch(fx.request({"true"}));
        REQUIRE(idle.started());
        CHECK(sup.wait(idle.row_id, 20s).exit_code == 0);
        CHECK(std::stod(fx.column(spinner.row_id, "(cpu_user_s + cpu_system_s)")) >= 0.3);
        CHECK(std::stod(fx.column(spinner.row_id, "cpu_user_s")) > 0);
        // Recorded (not NULL) for a process that used next to none, and not the spinner's.
        const auto idle_cpu = fx.column(idle.row_id, "(cpu_user_s + cpu_system_s)");
        REQUIRE_FALSE(idle_cpu.empty());
        CHECK(std::stod(idle_cpu) < 0.3);
        // Dashboards read it from the exits view.
        CHECK(fx.column(spinner.row_id, "(SELECT cpu_s >= 0.3 FROM ops.process_exits e WHERE e.id = process.id)") ==
              "true");
        CHECK(fx.column(self, "cpu_user_s").empty()); // still running
    }
    // Closed by itself on the way out, with everything it reaped.
    CHECK(std::stod(fx.column(self, "(cpu_user_s + cpu_system_s)")) >= 0.3);
}

TEST_CASE("spawn failures are values and close the row", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    const auto not_exec = fx.dir / "not_exec.sh";
    std::ofstream(not_exec) << "#!/bin/sh\nexit 0\n";
    const auto bad_interp = fx.dir / "bad_interp.sh";
    std::ofstream(bad_interp) << "#!/nonexistent/interpreter\n";
    ::chmod(bad_interp.c_str(), 0755);
    for (const std::string& program : {std::string("/nonexistent/program"), not_exec.string(), bad_interp.string(),
                                      std::string("no-such-program-in-path")}) {
        const auto launched = sup.launch(fx.request({program}));
        CHECK_FALSE(launched.started());
        CHECK(fx.column(launched.row_id, "status") == "exited");
        CHECK(fx.column(launched.row_id, "end_reason") == "spawn_failed");
        CHECK(fx.column(launched.row_id, "exit_code").empty());
    }
    CHECK(zombie_children() == 0);
}

TEST_CASE("foreground timeout escalates TERM then KILL", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    const auto polite = sup.launch(fx.request({"sleep", "100"}));
    const auto outcome = sup.wait(polite.row_id, 300ms, 5s);
    CHECK(outcome.timed_out);
    CHECK(outcome.exit_code == 143);
    CHECK_FALSE(outcome.killed);
    CHECK(fx.column(polite.row_id, "end_reason") == "timed_out");

    const auto deaf = sup.launch(fx.request({"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}));
    const auto cookie = fx.column(deaf.row_id, "cookie");
    const auto killed = sup.wait(deaf.row_id, 200ms, 300ms);
    CHECK(killed.timed_out);
    CHECK(killed.killed);
    CHECK(killed.exit_code == 137);
    CHECK(pids_with_cookie(cookie).empty());
    CHECK(eventually([&] { sup.process_events(); return zombie_children() == 0; }));
}

TEST_CASE("a foreground timeout's grace is slept through - not spun", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    const auto deaf = sup.launch(fx.request({"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}));
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    const auto outcome = sup.wait(deaf.row_id, 100ms, 1500ms);
    const auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - cpu0;
    CHECK(outcome.killed);
    CHECK(wall >= 1.5);
    // The CPU this thread used in the wait (its own: not the hook's). A busy
    // machine gives it less, never more: a loop that polls with no timeout
    // between the SIGTERM and the SIGKILL takes the whole grace.
    INFO("wall " << wall << " s, cpu " << cpu << " s");
    CHECK(cpu < 0.2);
}

TEST_CASE("a grandchild holding stdout does not delay exit detection", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    const auto t0 = std::chrono::steady_clock::now();
    const auto launched = sup.launch(fx.request({program_path("sup_stdout_holder").string(), "60"}));
    REQUIRE(eventually([&] {
        sup.process_events();
        return fx.column(launched.row_id, "status") == "exited";
    }));
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    CHECK(fx.column(launched.row_id, "exit_code") == "0");
    CHECK(sup.is_running(launched.row_id)); // the tree still holds the grandchild
    const auto outcomes = sup.teardown({launched.row_id}, 200ms);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].tree_empty); // the leaderless tree got SIGTERM directly
    CHECK(pids_with_cookie(fx.column(launched.row_id, "cookie")).empty());
}

TEST_CASE("the epoll fd integrates into a poll loop - heartbeats are written", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.heartbeat_interval = 100ms;
    Supervisor sup(*fx.conn, options);
    const auto sleeper = sup.launch(fx.request({"sleep", "100"}));
    const auto quick = sup.launch(fx.request({"sh", "-c", "exit 7"}));
    std::vector<ProcessOutcome> finished;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (finished.empty() && std::chrono::steady_clock::now() < deadline) {
        pollfd p{sup.epoll_fd(), POLLIN, 0};
        ::poll(&p, 1, 1000);
        sup.process_events();
        for (auto& o : sup.take_finished()) {
            finished.push_back(o);
        }
    }
    REQUIRE(finished.size() == 1);
    CHECK(finished[0].row_id == quick.row_id);
    CHECK(finished[0].exit_code == 7);
    REQUIRE(eventually([&] {
        sup.process_events();
        return !fx.column(sleeper.row_id, "heartbeat_at").empty() &&
               fx.column(sleeper.row_id, "heartbeat_at") != fx.column(sleeper.row_id, "started_at");
    }));
    CHECK_FALSE(fx.column(sup.self_row_id(), "heartbeat_at").empty());
    sup.teardown();
}

TEST_CASE("fd count stays flat and no zombies over 2000 launches", "[supervisor][stress]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    for (int i = 0; i < 20; ++i) {
        sup.wait(sup.launch(fx.request({"/bin/true"})).row_id, 10s);
    }
    const int fds_before = open_fd_count();
    for (int i = 0; i < 2000; ++i) {
        const auto launched = sup.launch(fx.request({"/bin/true"}));
        REQUIRE(launched.started());
        REQUIRE(sup.wait(launched.row_id, 10s).exit_code == 0);
    }
    CHECK(open_fd_count() == fds_before);
    CHECK(zombie_children() == 0);
}

TEST_CASE("a moved cgroup leaf is removed once - by its owner - and assignment releases the old one", "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    if (!sup.containment().uses_cgroups()) {
        skip_test("no cgroup containment on this machine: there is no leaf to move");
    }
    auto first = sup.containment().create_leaf(sup.self_row_id(), random_uuid());
    auto second = sup.containment().create_leaf(sup.self_row_id(), random_uuid());
    const auto first_dir = first.path();
    const auto second_dir = second.path();
    {
        CgroupLeaf moved(std::move(first)); // `first` is left owning nothing
        first = std::move(moved);
    }
    CHECK(std::filesystem::exists(first_dir));
    first = std::move(second); // the leaf `first` held is released
    CHECK_FALSE(std::filesystem::exists(first_dir));
    CHECK(std::filesystem::exists(second_dir));
    CHECK(first.procs_fd() >= 0);
    CHECK(first.remove());
    CHECK_FALSE(std::filesystem::exists(second_dir));
}

TEST_CASE("a hook's running write is deferred: a short hook is recorded in one write with its identity - a longer "
          "one shows running within the delay",
          "[supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    // Ends well within the write-behind window: queued -> exited, identity and start included.
    const auto quick = sup.launch(fx.request({"true"}));
    REQUIRE(quick.started());
    CHECK(fx.column(quick.row_id, "status") == "queued");
    CHECK(sup.wait(quick.row_id, 20s).exit_code == 0);
    CHECK(fx.column(quick.row_id, "status") == "exited");
    CHECK(fx.column(quick.row_id, "pid") == std::to_string(quick.pid));
    CHECK_FALSE(fx.column(quick.row_id, "start_ticks").empty());
    CHECK_FALSE(fx.column(quick.row_id, "boot_id").empty());
    CHECK(fx.column(quick.row_id, "(started_at <= ended_at AND started_at >= created_at)") == "true");

    // Runs on: recorded running with its identity once the delay has passed (the
    // supervisor's timer wakes its owner's loop for it).
    const auto slow = sup.launch(fx.request({"sleep", "5"}));
    REQUIRE(slow.started());
    REQUIRE(eventually([&] {
        pollfd p{sup.epoll_fd(), POLLIN, 0};
        ::poll(&p, 1, 100);
        sup.process_events();
        return fx.column(slow.row_id, "status") == "running";
    }));
    CHECK(fx.column(slow.row_id, "pid") == std::to_string(slow.pid));
    // started_at is the spawn, not the deferred write.
    CHECK(fx.column(slow.row_id, "(started_at < heartbeat_at)") == "true");
    const auto outcomes = sup.teardown({slow.row_id}, 2s);
    REQUIRE(outcomes.size() == 1);
    CHECK(fx.column(slow.row_id, "status") == "exited");
}

TEST_CASE("a hook whose row cannot be written does not run on: the error is thrown - nothing is left", "[supervisor]")
{
    SupervisionFixture fx;
    const bool fallback = GENERATE(false, true);
    Supervisor sup(*fx.conn, fx.options(fallback));
    // A timeout the row's CHECK constraint refuses: the insert fails. In a cgroup
    // leaf the hook is spawned while its row commits, so it must be stopped again.
    auto req = fx.request({"sleep", "30"});
    req.row_id = random_uuid();
    req.timeout_s = -1.0;
    CHECK_THROWS_AS(sup.launch(req), pqxx::sql_error);
    CHECK(fx.column(req.row_id, "status").empty());
    CHECK(sup.running().empty());
    CHECK_FALSE(std::filesystem::exists(sup.containment().scope_dir() / sup.self_row_id() / req.row_id));
    int children = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") == std::string::npos) {
            const auto stat = read_proc_stat(std::stoi(name));
            children += stat && stat->ppid == ::getpid() ? 1 : 0;
        }
    }
    CHECK(children == 0);
    // The connection is idle again: the next hook runs and is recorded.
    const auto next = sup.launch(fx.request({"true"}));
    REQUIRE(next.started());
    CHECK(sup.wait(next.row_id, 20s).exit_code == 0);
    CHECK(fx.column(next.row_id, "status") == "exited");
}

TEST_CASE("an empty cgroup leaf is reused by the next hook - a killed one is removed - none outlives the supervisor",
          "[supervisor]")
{
    SupervisionFixture fx;
    std::filesystem::path group;
    {
        Supervisor sup(*fx.conn, fx.options(false));
        REQUIRE(sup.containment_mode() == ContainmentMode::cgroup2);
        group = sup.containment().group_dir(sup.self_row_id());
        const auto first = sup.launch(fx.request({"true"}));
        REQUIRE(first.started());
        CHECK(sup.wait(first.row_id, 20s).exit_code == 0);
        const auto first_leaf = fx.column(first.row_id, "cgroup_path");
        CHECK(first_leaf == (group / first.row_id).string());
        CHECK(std::filesystem::exists(first_leaf)); // kept, empty, for the next hook

        // The next hook is born in it, and its row says so.
        const auto second = sup.launch(fx.request({"sh", "-c", "cat /proc/self/cgroup; exit 0"}));
        REQUIRE(second.started());
        CHECK(sup.wait(second.row_id, 20s).exit_code == 0);
        CHECK(fx.column(second.row_id, "cgroup_path") == first_leaf);
        CHECK(fx.column(second.row_id, "stdout_tail").find(first.row_id) != std::string::npos);

        // A tree that had to be killed leaves nothing behind, not even its leaf;
        // a fresh leaf is made while the kept one is in use.
        auto hung = fx.request({"sh", "-c", "trap '' TERM; sleep 30"});
        hung.timeout_s = 0.3;
        const auto running = sup.launch(fx.request({"sleep", "30"}));
        const auto killed = sup.launch(hung);
        REQUIRE(killed.started());
        const auto outcome = sup.wait(killed.row_id, std::nullopt, 200ms);
        CHECK(outcome.killed);
        CHECK(fx.column(killed.row_id, "cgroup_path") == (group / killed.row_id).string());
        CHECK_FALSE(std::filesystem::exists(group / killed.row_id));
        sup.teardown({running.row_id}, 2s);
    }
    // The supervisor's group, kept leaves included, is gone with it.
    CHECK_FALSE(std::filesystem::exists(group));
    CHECK(zombie_children() == 0);
}
