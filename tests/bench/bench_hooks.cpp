// Rows 1 and 5 of scripts/bench (see tests/bench/bench_report.hpp for the output).
//  1. hook overhead: launch + record + wait + result of a no-op hook through the
//     Supervisor, against raw posix_spawn+waitpid of the same program. The row is
//     the path a snapshot worker's foreground hooks take (its event loop; the exit
//     rides on the next launch's insert); Supervisor::wait, which writes the exit
//     before it returns (used for timeouts), is printed as context. Both paths
//     must leave every hook recorded as exited, or the program fails. As
//     context too, the process-start floor: the no-op linked with libpq
//     (bench_noop_pq, beside the no-op) and snapshot_worker --version;
//  5. teardown precision: 50 trees of 20 processes, half ignoring SIGTERM, with
//     staggered deadlines: p99 of (last process gone - deadline), and the total
//     teardown against the largest deadline.
// Needs TEST_DATABASE_URL. Usage: bench_hooks <no-op hook> [runs]
#include "common/config/lean_exec.hpp"
#include "tests/bench/bench_report.hpp"
#include "tests/bench/teardown_report.hpp"
#include "tests/bench/tmpfs_dir.hpp"
#include "tests/supervision/supervision_fixture.hpp"
#include "tests/support/pg_fixture.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <poll.h>
#include <sys/wait.h>

using namespace orch;
using namespace orch::test;
using Clock = std::chrono::steady_clock;

namespace {

// posix_spawn+wait of a no-op on the reference machine the absolute goals were set on.
constexpr double k_reference_spawn_us = 550;

double us_since(Clock::time_point t0, int runs)
{
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / runs;
}

// posix_spawn+wait of `argv` with `env` (none when empty), `runs` times, each
// required to exit 0; microseconds per run. `quiet` sends its output to /dev/null
// (two opens per spawn: not for row 1's baseline, whose no-op prints nothing).
double spawn_us(const std::vector<std::string>& argv, const std::vector<std::string>& env, int runs,
                bool quiet = false)
{
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env) {
        envp.push_back(const_cast<char*>(e.c_str()));
    }
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (quiet) {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
        pid_t pid = 0;
        int status = 0;
        if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0 ||
            waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "bench_hooks: %s did not start and exit 0\n", args[0]);
            std::exit(1);
        }
    }
    const double us = us_since(t0, runs);
    posix_spawn_file_actions_destroy(&actions);
    return us;
}

double raw_spawn_us(const std::string& program, int runs)
{
    return spawn_us({program}, {}, runs);
}

// Launches the no-op hook; returns its row id. Exits when it cannot start.
std::string launch_noop(Supervisor& sup, SupervisionFixture& fx, const std::string& program)
{
    const auto launched = sup.launch(fx.request({program}));
    if (!launched.started()) {
        std::fprintf(stderr, "bench_hooks: cannot start %s: %s\n", program.c_str(), launched.failure->message.c_str());
        std::exit(1);
    }
    return launched.row_id;
}

void noop_failed()
{
    std::fprintf(stderr, "bench_hooks: the no-op hook failed\n");
    std::exit(1);
}

double supervised_us(Supervisor& sup, SupervisionFixture& fx, const std::string& program, int runs)
{
    const auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
        const auto row_id = launch_noop(sup, fx, program);
        const auto outcome = sup.wait(row_id);
        if (!outcome.exit_code || *outcome.exit_code != 0) {
            noop_failed();
        }
    }
    return us_since(t0, runs);
}

// The path a snapshot worker's foreground hooks take (snapshot_worker/snapshot_run.cpp):
// launch, then the owner's event loop (poll on epoll_fd, process_events,
// take_finished). The exit is held and carried by the next launch's insert; the
// last one is written before the clock stops.
double supervised_loop_us(Supervisor& sup, SupervisionFixture& fx, const std::string& program, int runs)
{
    const auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
        const auto row_id = launch_noop(sup, fx, program);
        for (;;) {
            pollfd pfd{sup.epoll_fd(), POLLIN, 0};
            ::poll(&pfd, 1, -1);
            sup.process_events();
            const auto finished = sup.take_finished();
            if (finished.empty()) {
                continue;
            }
            if (finished.size() != 1 || finished.front().row_id != row_id || !finished.front().exit_code ||
                *finished.front().exit_code != 0) {
                noop_failed();
            }
            break;
        }
    }
    sup.write_held_exits();
    return us_since(t0, runs);
}

struct Side {
    std::vector<double> rounds; // us per hook, one per round
    std::vector<double> ratios; // against the raw round of the same round
};

void print_side(const char* name, const Side& side)
{
    using bench::fixed;
    std::printf("  %s: %s us per hook (median round; rounds %s-%s), paired ratio median %s (range %s-%s)\n", name,
                fixed(bench::median(side.rounds), 0).c_str(), fixed(bench::quantile(side.rounds, 0), 0).c_str(),
                fixed(bench::quantile(side.rounds, 1), 0).c_str(), fixed(bench::median(side.ratios), 2).c_str(),
                fixed(bench::quantile(side.ratios, 0), 2).c_str(), fixed(bench::quantile(side.ratios, 1), 2).c_str());
}

// Every hook the supervised paths ran is recorded: exited, exit code 0, with its
// identity. Exits with a message otherwise (the figures would not count).
void check_records(SupervisionFixture& fx, long expected)
{
    const auto recorded = pqxx::nontransaction(*fx.conn)
                              .exec1("SELECT count(*) FILTER (WHERE status = 'exited' AND exit_code = 0 "
                                     "  AND pid IS NOT NULL AND start_ticks IS NOT NULL AND ended_at IS NOT NULL), "
                                     " count(*) FROM process WHERE process_type = 'hook'");
    if (recorded[0].as<long>() != expected || recorded[1].as<long>() != expected) {
        std::fprintf(stderr, "bench_hooks: %ld hooks ran, %ld rows, %ld recorded as exited 0\n", expected,
                     recorded[1].as<long>(), recorded[0].as<long>());
        std::exit(1);
    }
}

// Reports row 1: the supervised cost per hook (the event-loop path) against raw.
// With `on_tmpfs` (the hooks' log directory on tmpfs) it reports the context row
// of that case only.
void hook_overhead(Supervisor& sup, SupervisionFixture& fx, const std::string& program, int runs,
                     bool on_tmpfs = false)
{
    // Warm up every path, then alternate short rounds so background noise hits
    // them alike. Each side's figure is its median round; a ratio is the median
    // of the rounds' paired ratios (a round of ours against the raw round just
    // before it): this VM has bursts of noise (2-3x for a second or two) that
    // move a mean in whole and even a median of either side alone.
    const int warm_up = 20;
    raw_spawn_us(program, warm_up);
    supervised_loop_us(sup, fx, program, warm_up);
    supervised_us(sup, fx, program, warm_up);
    const int rounds = 16;
    const int per_round = std::max(1, runs / rounds);
    std::vector<double> raw_rounds;
    Side loop;
    Side wait;
    for (int round = 0; round < rounds; ++round) {
        raw_rounds.push_back(raw_spawn_us(program, per_round));
        loop.rounds.push_back(supervised_loop_us(sup, fx, program, per_round));
        loop.ratios.push_back(loop.rounds.back() / raw_rounds.back());
        wait.rounds.push_back(supervised_us(sup, fx, program, per_round));
        wait.ratios.push_back(wait.rounds.back() / raw_rounds.back());
    }
    check_records(fx, 2L * (warm_up + rounds * per_round));
    const double raw = bench::value_of(bench::median(raw_rounds), "raw spawn rounds");
    std::printf("hook overhead, %d rounds of %d hooks per path; raw posix_spawn+waitpid %.0f us (rounds %s-%s)\n",
                rounds, per_round, raw, bench::fixed(bench::quantile(raw_rounds, 0), 0).c_str(),
                bench::fixed(bench::quantile(raw_rounds, 1), 0).c_str());
    print_side("event loop (foreground hooks of a snapshot worker)", loop);
    print_side("Supervisor::wait (timeouts; exit written before it returns)", wait);
    const auto ours = bench::median(loop.rounds);
    const auto ratio = bench::median(loop.ratios);
    const auto ratio_and_range = bench::fixed(ratio, 2) + " [" + bench::fixed(bench::quantile(loop.ratios, 0), 2) +
                                 "-" + bench::fixed(bench::quantile(loop.ratios, 1), 2) + "]";
    const std::string window = "wall clock per round, first spawn -> last hook reaped (ours: and its exit written); " +
                               std::to_string(rounds) + " interleaved pairs of " + std::to_string(per_round) +
                               " hooks, median of the paired ratios";
    if (on_tmpfs) {
        // Each supervised hook creates its log files and rerun script, which the
        // raw loop does not: on a disk whose file creations are slow (ext4
        // without a journal after a mass deletion) the goal row pays that too.
        bench::report_context("1 context: the same with the hooks' log directory on tmpfs (us/hook)",
                              bench::fixed(ours, 0), bench::fixed(raw, 0), ratio_and_range, window);
        return;
    }
    bench::report_row("1 hook overhead (us/hook)", bench::fixed(ours, 0), bench::fixed(raw, 0), ratio_and_range,
                      "ratio <= 2.0", bench::judge(ratio, {}, [](double r) { return r <= 2.0; }), window);
    bench::report_context("1 context: through Supervisor::wait (us/hook)", bench::fixed(bench::median(wait.rounds), 0),
                          bench::fixed(raw, 0), bench::fixed(bench::median(wait.ratios), 2), window);
    // The absolute goals of the process-bound rows (2 and 4) were set on a
    // reference machine where this costs 0.55 ms; the factor says how far this
    // machine is from it before any of our code runs.
    bench::report_context("1 context: raw spawn+wait here vs the goals' reference machine (us)", bench::fixed(raw, 0),
                          bench::fixed(k_reference_spawn_us, 0), bench::fixed(raw / k_reference_spawn_us, 2) + "x",
                          "wall clock, the raw rounds above vs a fixed reference figure");
}

// Context for the process-bound rows (2 and 4): what starting a process costs
// here before any of our code runs, once it loads libpq's ~25 shared libraries
// (krb5, ldap, GnuTLS, OpenSSL ...: Debian's libpq links them all), and for our
// snapshot_worker as a crawl worker starts it (--version: load, parse, exit).
// Every worker and every `orchestrator` command pays the second figure.
void process_start_floor(const std::string& noop, int runs)
{
    const auto noop_pq = (std::filesystem::path(noop).parent_path() / "bench_noop_pq").string();
    std::map<std::string, std::string> lean;
    add_lean_exec_environment(lean);
    std::vector<std::string> worker_env;
    for (const auto& [k, v] : lean) {
        worker_env.push_back(k + "=" + v);
    }
    const std::vector<std::string> worker = {bin_path("snapshot_worker").string(), "--version"};
    spawn_us({noop}, {}, 3);
    spawn_us({noop_pq}, {}, 3);
    spawn_us(worker, worker_env, 3, true);
    const int rounds = 8;
    const int per_round = std::max(2, runs / 40);
    std::vector<double> bare, pq, ours, pq_ratios, our_ratios;
    for (int round = 0; round < rounds; ++round) {
        bare.push_back(spawn_us({noop}, {}, per_round));
        pq.push_back(spawn_us({noop_pq}, {}, per_round));
        ours.push_back(spawn_us(worker, worker_env, per_round, true));
        pq_ratios.push_back(pq.back() / bare.back());
        our_ratios.push_back(ours.back() / bare.back());
    }
    using bench::fixed;
    const auto b = bench::median(bare), p = bench::median(pq), o = bench::median(ours);
    std::printf("process start, %d rounds of %d: no-op %s us, no-op linked with libpq %s us, "
                "snapshot_worker --version %s us\n",
                rounds, per_round, fixed(b, 0).c_str(), fixed(p, 0).c_str(), fixed(o, 0).c_str());
    bench::report_context("1 context: spawn+wait of the no-op linked with libpq / of snapshot_worker --version "
                          "vs the bare no-op (us)",
                          fixed(p, 0) + " / " + fixed(o, 0), fixed(b, 0),
                          fixed(bench::median(pq_ratios), 1) + "x / " + fixed(bench::median(our_ratios), 1) + "x",
                          "wall clock per round, first spawn -> last reaped; " + std::to_string(rounds) +
                              " interleaved rounds of " + std::to_string(per_round) + ", median of the paired ratios");
}

// A tree of 20 processes (sh + 19 sleeps); with `deaf` it ignores SIGTERM.
LaunchRequest tree_request(SupervisionFixture& fx, bool deaf, double timeout_s)
{
    auto req = fx.request({"sh", "-c", std::string(deaf ? "trap '' TERM; " : "") +
                                           "for i in $(seq 19); do sleep 1000 & done; wait"});
    req.timeout_s = timeout_s;
    return req;
}

// Waits until each tree (its cookie) has all its 20 processes, at most until
// `give_up`; returns the cookies of the trees that still have fewer.
std::vector<std::string> wait_populated(const std::vector<std::string>& cookies, Clock::time_point give_up)
{
    std::vector<std::string> waiting = cookies;
    while (!waiting.empty()) {
        // A tree once full stays full (its sleeps last 1000 s): check only the others.
        waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                     [](const std::string& c) { return pids_with_cookie(c).size() >= 20; }),
                      waiting.end());
        if (!waiting.empty()) {
            if (Clock::now() >= give_up) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return waiting;
}

double ms_between(Clock::time_point from, Clock::time_point to)
{
    return std::chrono::duration<double, std::milli>(to - from).count();
}

constexpr int k_trees = 50;

// One teardown of 50 trees of 20 processes; every other tree ignores SIGTERM, so
// it lives until its deadline and the SIGKILL of phase 3. Deadlines are staggered
// from `base_deadline_s` after the first launch, and must all fall after the
// teardown starts, once every tree has its 20 processes.
bench::TeardownRun teardown_once(Supervisor& sup, SupervisionFixture& fx, double base_deadline_s)
{
    std::map<std::string, double> timeouts;
    std::map<std::string, Clock::time_point> launched_at;
    std::map<std::string, std::string> cookie_of;
    std::vector<std::string> cookies;
    const auto first_launch = Clock::now();
    for (int i = 0; i < k_trees; ++i) {
        auto req = tree_request(fx, i % 2 == 0, base_deadline_s + 0.02 * i);
        const auto row = sup.launch(req).row_id;
        timeouts[row] = *req.timeout_s * 1000.0;
        launched_at[row] = Clock::now();
        cookie_of[row] = fx.column(row, "cookie");
        cookies.push_back(cookie_of[row]);
    }
    // Every tree has its 20 processes before the clock starts (a tree still forking
    // when its deadline comes would be measured against its own start-up); one
    // that has not by the first deadline voids the run.
    const auto first_deadline =
        first_launch + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(base_deadline_s));
    const auto unpopulated = wait_populated(cookies, first_deadline);
    const auto t0 = Clock::now();
    const auto outcomes = sup.teardown({}, std::chrono::seconds(30));
    bench::TeardownRun run;
    run.launched = k_trees;
    run.total_ms = ms_between(t0, Clock::now());
    for (const auto& o : outcomes) {
        if (launched_at.count(o.row_id) == 0) {
            continue; // not one of the 50 (none is expected: the probe was torn down)
        }
        bench::TornDownTree tree;
        tree.id = o.row_id;
        tree.deadline_ms = timeouts[o.row_id];
        tree.teardown_began_ms = ms_between(launched_at[o.row_id], t0);
        tree.gone_ms = static_cast<double>(o.elapsed.count());
        tree.populated = std::find(unpopulated.begin(), unpopulated.end(), cookie_of[o.row_id]) == unpopulated.end();
        tree.survived_kill = !o.tree_empty;
        if (tree.survived_kill) {
            std::printf("teardown: tree %s survived SIGKILL\n", o.row_id.c_str());
        }
        run.trees.push_back(tree);
    }
    const auto late_ms = bench::late_after_deadline_ms(run);
    std::printf("teardown of %d trees x 20 processes, first deadline %.1f s after the first launch (%zu with a "
                "deadline after the teardown began; %zu not fully started): after deadline p50 %s ms, p99 %s ms, "
                "max %s ms; total %.0f ms\n",
                k_trees, base_deadline_s, late_ms.size(), unpopulated.size(),
                bench::fixed(bench::quantile(late_ms, 0.5)).c_str(), bench::fixed(bench::quantile(late_ms, 0.99)).c_str(),
                bench::fixed(bench::quantile(late_ms, 1.0)).c_str(), run.total_ms);
    return run;
}

void teardown_precision(Supervisor& sup, SupervisionFixture& fx)
{
    // How long a tree takes to start is measured on one tree first (a VM whose
    // forks are slow needs seconds for the 950 sleeps), and the launches get
    // twice that per tree. A run whose trees were not all started in time (the
    // machine slowed down meanwhile) measured no precision: it runs again with
    // twice the allowance, up to three runs, and the last one is the row.
    const auto c0 = Clock::now();
    const auto probe = sup.launch(tree_request(fx, false, 600));
    if (!wait_populated({fx.column(probe.row_id, "cookie")}, c0 + std::chrono::seconds(60)).empty()) {
        throw std::runtime_error("a tree of 20 processes did not start within 60 s");
    }
    const double tree_s = std::chrono::duration<double>(Clock::now() - c0).count();
    sup.teardown({probe.row_id}, std::chrono::seconds(5));
    double allowance = 2;
    bench::TeardownRun run;
    for (int attempt = 1; attempt <= 3; ++attempt, allowance *= 2) {
        run = teardown_once(sup, fx, 1.0 + k_trees * allowance * tree_s);
        const bool started_in_time = std::all_of(run.trees.begin(), run.trees.end(), [](const bench::TornDownTree& t) {
            return t.populated && t.deadline_ms >= t.teardown_began_ms;
        });
        if (started_in_time) {
            break;
        }
    }
    for (const auto& row : bench::teardown_rows(run)) {
        bench::report(row);
    }
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_hooks <no-op hook> [runs] [--tmpfs]\n");
        return 2;
    }
    const std::string program = argv[1];
    const int runs = argc > 2 ? std::atoi(argv[2]) : 400;
    if (argc > 3 && std::string(argv[3]) == "--tmpfs") {
        bench::TmpfsDir shm;
        if (shm.path().empty()) {
            std::printf("no tmpfs at /dev/shm: row 1's tmpfs context row is skipped\n");
            return 0;
        }
        ::setenv("TMPDIR", shm.path().c_str(), 1); // the fixture's scratch directory, hence the hooks' logs
        SupervisionFixture fx;
        auto options = fx.options(false);
        Supervisor sup(*fx.conn, options);
        hook_overhead(sup, fx, program, runs, true);
        return 0;
    }
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.teardown_grace = std::chrono::seconds(30);
    Supervisor sup(*fx.conn, options);
    std::printf("containment: %s\n", std::string(to_string(sup.containment_mode())).c_str());
    hook_overhead(sup, fx, program, runs);
    process_start_floor(program, runs);
    teardown_precision(sup, fx);
    return 0;
}
