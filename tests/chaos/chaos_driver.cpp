// chaos_driver: the fault-injection suite behind scripts/chaos.
//   chaos_driver [--trials N] [--seed S] [--quick] [--kinds a,b,...] [--load|--no-load]
//                [--pg-dir DIR]
// Needs TEST_DATABASE_URL (a server it may create scratch databases on), root
// (tmpfs mounts), and --pg-dir (the `orchestrator db start --data-dir` of a
// cluster of its own) for the PostgreSQL faults, which are skipped without it.
// Exit status: 0 when no invariant was violated and every fault kind was injected
// often enough (quick: once; full: in half of its trials), 1 otherwise, 2 on bad usage.
#include "tests/chaos/chaos_report.hpp"
#include "tests/chaos/load_run.hpp"
#include "tests/chaos/pg_control.hpp"
#include "tests/chaos/trial.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <sstream>

namespace {

using namespace orch::chaos;

struct Args {
    int trials = 50;
    bool trials_given = false;
    std::uint64_t seed = 0;
    bool seed_given = false;
    bool quick = false;
    int load = -1;  // -1: default (full: yes, quick: small)
    std::string pg_dir;
    std::set<std::string> kinds;
};

int usage(const std::string& why)
{
    std::cerr << "chaos_driver: " << why
              << "\nusage: chaos_driver [--trials N] [--seed S] [--quick] [--kinds a,b] [--load|--no-load] "
                 "[--pg-dir DIR]\n";
    return 2;
}

} // namespace

int main(int argc, char** argv)
{
    ::setenv("ORCH_BIN_DIR", ORCH_CHAOS_BIN_DIR, 0);
    ::setenv("ORCH_SOURCE_DIR", ORCH_CHAOS_SOURCE_DIR, 0);
    Args a;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string arg = argv[i];
            auto next = [&]() -> std::string {
                if (i + 1 >= argc) {
                    throw std::invalid_argument(arg + " needs a value");
                }
                return argv[++i];
            };
            if (arg == "--trials") {
                a.trials = std::stoi(next());
                a.trials_given = true;
            } else if (arg == "--seed") {
                a.seed = std::stoull(next());
                a.seed_given = true;
            } else if (arg == "--quick") {
                a.quick = true;
            } else if (arg == "--load") {
                a.load = 1;
            } else if (arg == "--no-load") {
                a.load = 0;
            } else if (arg == "--pg-dir") {
                a.pg_dir = next();
            } else if (arg == "--kinds") {
                std::istringstream ks(next());
                for (std::string k; std::getline(ks, k, ',');) {
                    a.kinds.insert(k);
                }
            } else {
                return usage("unknown argument " + arg);
            }
        }
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    if (!a.seed_given) {
        a.seed = std::random_device{}();
    }
    PgControl pg(a.pg_dir);
    std::vector<FaultKind> kinds;
    for (auto k : all_fault_kinds()) {
        if ((a.kinds.empty() || a.kinds.count(to_string(k)) > 0) && (!needs_own_cluster(k) || pg.available())) {
            kinds.push_back(k);
        }
    }
    if (kinds.empty()) {
        return usage("no fault kinds to run");
    }
    if (!pg.available()) {
        std::cout << "chaos: no cluster of our own (--pg-dir): PostgreSQL restart/stop faults skipped\n";
    }
    // Quick: each kind a few times (2 by default); full: N trials cycling through the kinds, order shuffled.
    int trials = a.trials_given ? a.trials : a.quick ? static_cast<int>(kinds.size()) * 2 : a.trials;
    std::mt19937_64 rng(a.seed);
    std::vector<FaultKind> plan;
    while (static_cast<int>(plan.size()) < trials) {
        auto round = kinds;
        std::shuffle(round.begin(), round.end(), rng);
        plan.insert(plan.end(), round.begin(), round.end());
    }
    plan.resize(static_cast<std::size_t>(trials));
    std::cout << fmt::format("chaos: {} trials, seed {} (rerun with --seed {}){}\n", trials, a.seed, a.seed,
                             a.quick ? ", quick" : "");

    auto started = std::chrono::steady_clock::now();
    std::vector<TrialResult> results;
    for (int i = 0; i < trials; ++i) {
        TrialOptions o;
        o.index = i + 1;
        o.kind = plan[static_cast<std::size_t>(i)];
        o.seed = rng();
        o.quick = a.quick;
        o.pg = &pg;
        TrialResult r;
        try {
            r = run_trial(o);
        } catch (const std::exception& e) {
            r.index = o.index;
            r.kind = o.kind;
            r.violations.push_back(std::string("driver: ") + e.what());
        }
        std::cout << fmt::format("trial {:>3}/{} {:<20} {:>2} URLs {:<8} {:>5.1f} s  recover {:>5}  {}  {}\n", r.index,
                                 trials, to_string(r.kind), r.urls, r.daemon ? "daemon" : "one-shot", r.total_s,
                                 r.recover_s >= 0 ? fmt::format("{:.1f}", r.recover_s) : "-",
                                 !r.violations.empty() ? fmt::format("{} VIOLATION(S)", r.violations.size())
                                 : r.injected          ? "ok"
                                                       : "NOT INJECTED",
                                 r.detail)
                  << std::flush;
        for (const auto& v : r.violations) {
            std::cout << "      " << v.substr(0, 300) << "\n";
        }
        results.push_back(std::move(r));
    }
    std::vector<LoadResult> loads;
    bool load = a.load == 1 || (a.load == -1 && a.kinds.empty());
    if (load) {
        if (a.quick) {
            loads.push_back(run_load("1 crawl x 300 URLs, 8 workers", 1, 300, 1, 8, 600));
            loads.push_back(run_load("5 crawls at once x 10 URLs", 5, 10, 5, 2, 600));
        } else {
            loads.push_back(run_load("1 crawl x 2000 URLs, 8 workers", 1, 2000, 1, 8, 3600));
            loads.push_back(run_load("20 crawls at once x 20 URLs", 20, 20, 20, 2, 1800));
        }
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto verdict = print_report(std::cout, results, loads, wall,
                                a.quick ? InjectionRule::once_per_kind : InjectionRule::half_of_each_kind);
    return verdict.passed() ? 0 : 1;
}
