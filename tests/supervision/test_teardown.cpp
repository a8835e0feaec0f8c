#include "tests/supervision/supervision_fixture.hpp"

#include "common/supervision/file_tail.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

namespace {

// Says "ready" once SIGTERM is ignored, so a test can wait for that.
const char* k_deaf = "trap '' TERM; echo ready; while :; do sleep 1; done";

const char* mode_name(bool fallback) { return fallback ? "fallback" : "cgroup"; }

} // namespace

TEST_CASE("polite - deaf - escaper and stopped hooks torn down together", "[teardown]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(fallback));
    auto polite_req = fx.request({"sleep", "100"}, "polite");
    polite_req.timeout_s = 60;
    const auto polite = sup.launch(polite_req);
    const auto deaf = sup.launch(fx.request({"sh", "-c", k_deaf}, "deaf"));
    const auto escaper = sup.launch(fx.request({program_path("sup_escaper").string()}, "escaper"));
    const auto scrubbed = sup.launch(fx.request({program_path("sup_escaper").string(), "clear-env"}, "scrubbed"));
    const auto stopped = sup.launch(fx.request({"sleep", "100"}, "stopped"));
    REQUIRE(::kill(stopped.pid, SIGSTOP) == 0); // our unreaped child: the pid is pinned

    auto grandchild_of = [&](const LaunchResult& l) {
        const auto path = fx.dir / "logs" / (std::string(l.row_id == escaper.row_id ? "escaper" : "scrubbed") + "." +
                                             l.row_id + ".stdout.log");
        pid_t pid = 0;
        REQUIRE(eventually([&] { return (pid = std::atoi(read_file_tail(path).c_str())) > 0; }));
        return pid;
    };
    const pid_t escaped = grandchild_of(escaper);
    const pid_t escaped_scrubbed = grandchild_of(scrubbed);
    REQUIRE(pid_alive(escaped));
    REQUIRE(pid_alive(escaped_scrubbed));
    // A SIGTERM that lands before sh has run its trap kills it at once.
    const auto deaf_log = fx.column(deaf.row_id, "stdout_path");
    REQUIRE(eventually([&] { return read_file_tail(deaf_log).find("ready") != std::string::npos; }));

    const auto t0 = std::chrono::steady_clock::now();
    const auto outcomes = sup.teardown({}, 1500ms);
    const auto total = std::chrono::steady_clock::now() - t0;
    REQUIRE(outcomes.size() == 5);
    for (const auto& o : outcomes) {
        INFO("row " << o.row_id);
        CHECK(o.tree_empty);
        CHECK(pids_with_cookie(fx.column(o.row_id, "cookie")).empty());
        CHECK(fx.column(o.row_id, "status") == "exited");
        if (fallback && o.row_id == scrubbed.row_id) {
            continue; // known limit of the fallback: see below
        }
        if (o.row_id == polite.row_id || o.row_id == stopped.row_id) {
            CHECK(o.exit_code == 143);
            CHECK_FALSE(o.killed);
            CHECK(fx.column(o.row_id, "end_reason") == "exited");
        } else {
            CHECK(o.killed);
            CHECK(fx.column(o.row_id, "end_reason") == "killed_on_teardown");
        }
    }
    CHECK_FALSE(pid_alive(escaped));
    if (!fallback) {
        CHECK_FALSE(pid_alive(escaped_scrubbed));
    } else if (pid_alive(escaped_scrubbed)) {
        // Documented residual risk of the fallback: a process that both left
        // the process group (setsid) and scrubbed its environment cannot be
        // attributed to its tree. Only cgroup containment catches it.
        WARN("fallback: setsid + env-scrubbed grandchild survived teardown (known limit)");
        ::kill(escaped_scrubbed, SIGKILL);
    }
    CHECK(total < 6s);
    CHECK(total >= 1400ms);
    CHECK(eventually([&] { sup.process_events(); return zombie_children() == 0; }));
    if (!fallback) {
        // A killed tree's leaf is removed; an empty leaf may be kept for the
        // next hook, a populated one never.
        const auto group = sup.containment().group_dir(sup.self_row_id());
        for (const auto& o : outcomes) {
            if (o.killed) {
                CHECK_FALSE(std::filesystem::exists(group / o.row_id));
            }
        }
        for (const auto& entry : std::filesystem::directory_iterator(group)) {
            if (entry.is_directory()) {
                INFO(entry.path());
                CHECK(read_file_tail(entry.path() / "cgroup.events").find("populated 0") != std::string::npos);
            }
        }
    }
}

TEST_CASE("a teardown's grace is slept through - not spun", "[teardown]")
{
    SupervisionFixture fx;
    const bool fallback = GENERATE(false, true);
    Supervisor sup(*fx.conn, fx.options(fallback));
    const auto deaf = sup.launch(fx.request({"sh", "-c", k_deaf}, "deaf"));
    const auto polite = sup.launch(fx.request({"sleep", "100"}, "polite"));
    const auto log = fx.dir / "logs" / ("deaf." + deaf.row_id + ".stdout.log");
    REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    const auto outcomes = sup.teardown({}, 1500ms);
    const auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - cpu0;
    REQUIRE(outcomes.size() == 2);
    CHECK(wall >= 1.5);
    // As for wait(): the thread's own CPU, which a busy machine can only lower.
    INFO(mode_name(fallback) << ": wall " << wall << " s, cpu " << cpu << " s");
    CHECK(cpu < 0.2);
}

TEST_CASE("polite hook: 143 - no SIGKILL - well before its deadline", "[teardown]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    const auto polite = sup.launch(fx.request({"sleep", "100"}, "polite"));
    const auto outcomes = sup.teardown({polite.row_id}, 10s);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].exit_code == 143);
    CHECK(outcomes[0].term_signal == SIGTERM);
    CHECK(outcomes[0].stop_signalled); // the stop ended it: a snapshot worker requeues it
    CHECK_FALSE(outcomes[0].killed);
    CHECK(outcomes[0].elapsed < 3s);
}

TEST_CASE("a forker with 1000+ descendants leaves no survivor", "[teardown][forker]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(fallback));
    const auto forker = sup.launch(fx.request({program_path("sup_forker").string(), "40", "30"}, "forker"));
    const auto cookie = fx.column(forker.row_id, "cookie");
    REQUIRE(eventually([&] { return pids_with_cookie(cookie).size() >= 1000; }, 30s));
    const auto outcomes = sup.teardown({forker.row_id}, 300ms);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].killed);
    CHECK(outcomes[0].tree_empty);
    CHECK(pids_with_cookie(cookie).empty());
    CHECK(eventually([&] { sup.process_events(); return zombie_children() == 0; }));
}

TEST_CASE("ten trees with different remaining timeouts: total is the largest - not the sum", "[teardown]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    std::map<std::string, double> timeouts;
    for (int i = 0; i < 10; ++i) {
        auto req = fx.request({"sh", "-c", k_deaf}, "deaf" + std::to_string(i));
        req.timeout_s = 0.4 + 0.2 * i; // 0.4 .. 2.2 s
        timeouts[sup.launch(req).row_id] = *req.timeout_s;
    }
    // A SIGTERM that lands before sh has run its trap kills it at once: the
    // spawn returns as soon as sh is exec'd, not once it ignores TERM.
    for (const auto& [row_id, timeout] : timeouts) {
        const auto log = fx.column(row_id, "stdout_path");
        REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));
    }
    const auto outcomes = sup.teardown({}, 30s);
    REQUIRE(outcomes.size() == 10);
    // Judged by when the supervisor saw each tree end (ProcessOutcome::elapsed,
    // since its launch, as its pidfd reported the exit), not by the test's clock.
    std::chrono::milliseconds last_end{0};
    for (const auto& o : outcomes) {
        const auto expected = std::chrono::duration<double>(timeouts[o.row_id]);
        INFO("timeout " << timeouts[o.row_id] << "s, ended after " << o.elapsed.count() << "ms");
        CHECK(o.killed);
        // Not killed before its own timeout: the teardown waited for it.
        CHECK(o.elapsed >= expected - 50ms);
        // Killed at its own timeout, not after the others' (1.5 s of slack for a
        // loaded machine; the next tree's timeout is 0.2 s later, the sum 13 s).
        CHECK(o.elapsed <= expected + 1500ms);
        CHECK(pids_with_cookie(fx.column(o.row_id, "cookie")).empty());
        last_end = std::max(last_end, o.elapsed);
    }
    // The teardown as a whole: the largest timeout (2.2 s), not the sum (13 s).
    CHECK(last_end >= 2200ms - 50ms);
    CHECK(last_end <= 2200ms + 1500ms);
}

namespace {

// A child that stops on SIGTERM and leaves `marker` as proof it got one.
std::string term_marking_child(const std::filesystem::path& marker)
{
    return "trap 'echo term > " + marker.string() + "; exit 0' TERM; echo ready; while :; do sleep 0.05; done";
}

char proc_state(pid_t pid)
{
    const auto stat = read_file_tail("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

} // namespace

TEST_CASE("leader dies of SIGTERM: the rest of its tree gets SIGTERM - not just the SIGKILL", "[teardown]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(fallback));
    const auto marker = fx.dir / "child.term";
    // sh has no TERM handler: it dies of the signal and passes nothing on.
    const auto wrapper = sup.launch(
        fx.request({"sh", "-c", "sh -c \"$1\" & wait", "wrapper", term_marking_child(marker)}, "wrapper"));
    const auto log = fx.column(wrapper.row_id, "stdout_path");
    REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));

    const auto t0 = std::chrono::steady_clock::now();
    const auto outcomes = sup.teardown({wrapper.row_id}, 5s);
    const auto total = std::chrono::steady_clock::now() - t0;
    REQUIRE(outcomes.size() == 1);
    CHECK(std::filesystem::exists(marker));
    CHECK(outcomes[0].exit_code == 143);
    CHECK_FALSE(outcomes[0].killed);
    CHECK(outcomes[0].tree_empty);
    CHECK(fx.column(wrapper.row_id, "end_reason") == "exited");
    CHECK(total < 2500ms); // not the whole grace
    CHECK(pids_with_cookie(fx.column(wrapper.row_id, "cookie")).empty());
}

TEST_CASE("leader exited but not reaped yet: phase 1 signals the whole tree", "[teardown]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(fallback));
    const auto marker = fx.dir / "child.term";
    const auto leader = sup.launch(
        fx.request({"sh", "-c", "sh -c \"$1\" &", "leader", term_marking_child(marker)}, "leader"));
    const auto log = fx.column(leader.row_id, "stdout_path");
    REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));
    // No events are processed until the teardown: the leader stays a zombie,
    // which still accepts a signal through its pidfd.
    REQUIRE(eventually([&] { return proc_state(leader.pid) == 'Z'; }));

    const auto t0 = std::chrono::steady_clock::now();
    const auto outcomes = sup.teardown({leader.row_id}, 5s);
    const auto total = std::chrono::steady_clock::now() - t0;
    REQUIRE(outcomes.size() == 1);
    CHECK(std::filesystem::exists(marker));
    CHECK(outcomes[0].exit_code == 0);
    // It had ended on its own before the SIGTERM: its exit is its own result.
    CHECK_FALSE(outcomes[0].stop_signalled);
    CHECK_FALSE(outcomes[0].killed);
    CHECK(outcomes[0].tree_empty);
    CHECK(total < 2500ms);
    CHECK(pids_with_cookie(fx.column(leader.row_id, "cookie")).empty());
}

TEST_CASE("a database error mid-teardown still kills every tree - none outlives the supervisor", "[teardown]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    SupervisionFixture fx;
    std::string deaf_cookie;
    {
        Supervisor sup(*fx.conn, fx.options(fallback));
        // The polite tree's exit is written during the teardown, on a connection
        // that is gone, between SIGTERM and SIGKILL: the teardown holds it and
        // goes on (it never waits for the database); the destructor's own
        // write after it fails.
        const auto polite = sup.launch(fx.request({"sh", "-c", "echo ready; while :; do sleep 0.1; done"}, "polite"));
        const auto deaf = sup.launch(fx.request(
            {"sh", "-c", std::string("setsid sh -c \"") + k_deaf + "\" & " + k_deaf}, "deaf"));
        deaf_cookie = fx.column(deaf.row_id, "cookie");
        const auto log = fx.column(deaf.row_id, "stdout_path");
        REQUIRE(eventually([&] { return read_file_tail(log).find("ready\nready") != std::string::npos; }));
        REQUIRE(pids_with_cookie(deaf_cookie).size() >= 2);
        pqxx::connection killer(base_database_url());
        pqxx::nontransaction(killer).exec_params("SELECT pg_terminate_backend($1)", fx.conn->backendpid());
        (void)polite;
    } // ~Supervisor: teardown, which meets the dead connection
    CHECK(eventually([&] { return pids_with_cookie(deaf_cookie).empty(); }, 5s));
}
