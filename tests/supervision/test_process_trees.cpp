// ProcessTrees with no database at all: real /bin/sh children launched into
// containment, waited for, timed out and torn down, with what it reports to
// its observer checked against what happened.
#include "common/base/random_id.hpp"
#include "common/supervision/file_tail.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/supervision/process_trees.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <poll.h>

using namespace orch;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// Says "ready" once SIGTERM is ignored, so a test can wait for that.
const char* k_deaf = "trap '' TERM; echo ready; while :; do sleep 1; done";

// What the trees reported, in order.
struct RecordingObserver : TreeObserver {
    std::vector<LeaderExit> exits;
    std::map<std::string, std::string> decided; // id -> end reason
    std::vector<ProcessOutcome> finished;
    int passes = 0;
    void leader_exited(const LeaderExit& exit) override { exits.push_back(exit); }
    void end_decided(const std::string& id, const std::string& end_reason) override { decided[id] = end_reason; }
    void tree_finished(const ProcessOutcome& outcome) override { finished.push_back(outcome); }
    void events_handled() override { ++passes; }
    std::optional<Clock::time_point> next_due() const override { return std::nullopt; }
};

struct Launched {
    std::string id;
    pid_t pid = 0;
    std::filesystem::path stdout_path;
};

struct TreesFixture {
    explicit TreesFixture(bool fallback, std::chrono::milliseconds grace = 3000ms,
                          std::chrono::milliseconds kill_timeout = 5000ms)
        : dir("trees"), trees(options(fallback, grace, kill_timeout), &observer)
    {
    }

    static TreeOptions options(bool fallback, std::chrono::milliseconds grace, std::chrono::milliseconds kill_timeout)
    {
        static int counter = 0;
        TreeOptions o;
        o.containment.scope = "test-trees-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
        o.containment.force_fallback = fallback;
        o.group = random_uuid();
        o.teardown_grace = grace;
        o.kill_timeout = kill_timeout;
        return o;
    }

    Launched launch(const std::string& script, const std::string& name, std::optional<double> timeout_s = {})
    {
        LaunchRequest request;
        request.argv = {"/bin/sh", "-c", script};
        request.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}};
        request.pwd = dir.path();
        request.log_dir = dir / "logs";
        request.name = name;
        request.timeout_s = timeout_s;
        Launched out;
        out.id = random_uuid();
        auto slot = trees.prepare(request, out.id, random_uuid());
        auto started = trees.start(std::move(slot), request);
        REQUIRE(std::holds_alternative<StartedTree>(started));
        auto& tree = std::get<StartedTree>(started);
        out.pid = tree.identity().pid;
        out.stdout_path = dir / "logs" / (name + "." + out.id + ".stdout.log");
        trees.track(std::move(tree));
        return out;
    }

    // The owner's loop: events until `done` holds (false after 10 s).
    bool run_until(const std::function<bool()>& done)
    {
        const auto deadline = Clock::now() + 10s;
        while (!done()) {
            if (Clock::now() >= deadline) {
                return false;
            }
            pollfd p{trees.epoll_fd(), POLLIN, 0};
            ::poll(&p, 1, 20);
            trees.process_events();
        }
        return true;
    }

    bool says(const Launched& launched, const std::string& word)
    {
        return run_until([&] { return read_file_tail(launched.stdout_path).find(word) != std::string::npos; });
    }

    test::ScratchDir dir; // outlives the trees, whose logs it holds
    RecordingObserver observer;
    ProcessTrees trees;
};

bool alive(pid_t pid)
{
    const auto stat = read_proc_stat(pid);
    return stat && stat->state != 'Z' && stat->state != 'X';
}

const char* mode_name(bool fallback) { return fallback ? "fallback" : "probed"; }

} // namespace

TEST_CASE("process trees: a shell child's exit code is its outcome and is reported once", "[process_trees]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    TreesFixture fx(fallback);
    const auto child = fx.launch("echo out; exit 7", "exits");
    REQUIRE(fx.trees.is_running(child.id));
    const auto outcome = fx.trees.wait(child.id);
    CHECK(outcome.row_id == child.id);
    CHECK(outcome.exit_code == 7);
    CHECK_FALSE(outcome.term_signal);
    CHECK(outcome.end_reason == "exited");
    CHECK_FALSE(outcome.timed_out);
    CHECK_FALSE(outcome.killed);
    CHECK_FALSE(outcome.stop_signalled);
    CHECK(outcome.tree_empty);
    CHECK_FALSE(fx.trees.is_running(child.id));
    REQUIRE(fx.observer.exits.size() == 1);
    CHECK(fx.observer.exits[0].id == child.id);
    CHECK(fx.observer.exits[0].exit.exit_code == 7);
    CHECK(fx.observer.exits[0].claimed);
    CHECK(read_file_tail(fx.observer.exits[0].stdout_path) == "out\n");
    REQUIRE(fx.observer.finished.size() == 1);
    CHECK(fx.observer.finished[0].row_id == child.id);
    CHECK(fx.observer.decided.empty());
    CHECK(fx.observer.passes > 0);
    // Waited for, so not among the trees that ended on their own.
    CHECK(fx.trees.take_finished().empty());
}

TEST_CASE("process trees: a timeout sends SIGTERM then SIGKILLs a child that ignores it", "[process_trees]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    TreesFixture fx(fallback);
    // Notes the SIGTERM and carries on: only the SIGKILL ends it.
    const auto child = fx.launch("trap 'echo term' TERM; echo ready; while :; do sleep 0.1; done", "deaf");
    REQUIRE(fx.says(child, "ready"));
    const auto t0 = Clock::now();
    const auto outcome = fx.trees.wait(child.id, 300ms, 700ms);
    const auto elapsed = Clock::now() - t0;
    CHECK(outcome.timed_out);
    CHECK(outcome.killed);
    CHECK(outcome.stop_signalled);
    CHECK(outcome.end_reason == "timed_out");
    CHECK(outcome.term_signal == SIGKILL);
    CHECK(outcome.exit_code == 128 + SIGKILL);
    CHECK(outcome.tree_empty);
    // The SIGTERM came at the timeout, and the SIGKILL only a grace later.
    CHECK(read_file_tail(child.stdout_path).find("term") != std::string::npos);
    CHECK(elapsed >= 1000ms);
    CHECK(elapsed < 1000ms + 5000ms);
    CHECK_FALSE(alive(child.pid));
}

TEST_CASE("process trees: the leftovers of a leader that exited are killed - its outcome stays its own",
          "[process_trees]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    TreesFixture fx(fallback);
    const auto child = fx.launch("sleep 100 & echo $!; exit 3", "leaves");
    pid_t background = 0;
    REQUIRE(fx.run_until([&] { return (background = std::atoi(read_file_tail(child.stdout_path).c_str())) > 0; }));
    REQUIRE(fx.run_until([&] { return fx.trees.left_processes(child.id); }));
    REQUIRE(alive(background));
    CHECK(fx.trees.unreaped().empty());
    const auto outcome = fx.trees.wait(child.id, 0ms);
    CHECK(outcome.exit_code == 3);
    CHECK(outcome.end_reason == "exited");
    CHECK_FALSE(outcome.timed_out);
    CHECK(outcome.killed);
    CHECK_FALSE(outcome.stop_signalled);
    CHECK(outcome.tree_empty);
    CHECK_FALSE(alive(background));
    CHECK_FALSE(fx.trees.is_running(child.id));
}

TEST_CASE("process trees: a teardown of several trees is bounded by grace plus kill_timeout", "[process_trees]")
{
    const bool fallback = GENERATE(false, true);
    INFO("mode " << mode_name(fallback));
    constexpr auto grace = 800ms;
    constexpr auto kill_timeout = 1500ms;
    TreesFixture fx(fallback, 10s, kill_timeout);
    std::vector<Launched> deaf;
    for (int i = 0; i < 4; ++i) {
        deaf.push_back(fx.launch(k_deaf, "deaf" + std::to_string(i)));
    }
    const auto polite = fx.launch("exec sleep 100", "polite");
    for (const auto& d : deaf) {
        // A SIGTERM that lands before sh has run its trap kills it at once.
        REQUIRE(fx.says(d, "ready"));
    }
    const auto t0 = Clock::now();
    const auto outcomes = fx.trees.teardown({}, grace);
    const auto elapsed = Clock::now() - t0;
    REQUIRE(outcomes.size() == 5);
    // In parallel: four deaf trees one after another would take 4 x grace.
    CHECK(elapsed >= grace);
    CHECK(elapsed < grace + kill_timeout);
    for (const auto& outcome : outcomes) {
        INFO("tree " << outcome.row_id);
        CHECK(outcome.tree_empty);
        CHECK(outcome.stop_signalled);
        if (outcome.row_id == polite.id) {
            CHECK(outcome.exit_code == 128 + SIGTERM);
            CHECK_FALSE(outcome.killed);
            CHECK(outcome.end_reason == "exited");
            CHECK(fx.observer.decided.count(outcome.row_id) == 0);
        } else {
            CHECK(outcome.killed);
            CHECK(outcome.end_reason == "killed_on_teardown");
            CHECK(fx.observer.decided[outcome.row_id] == "killed_on_teardown");
        }
    }
    CHECK(fx.observer.decided.size() == 4);
    CHECK(fx.observer.finished.size() == 5);
    CHECK(fx.trees.running().empty());
    for (const auto& d : deaf) {
        CHECK_FALSE(alive(d.pid));
    }
    CHECK_FALSE(alive(polite.pid));
}
