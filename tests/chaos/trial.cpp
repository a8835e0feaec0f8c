#include "tests/chaos/trial.hpp"

#include "tests/chaos/chaos_hooks.hpp"
#include "tests/chaos/db_query.hpp"
#include "tests/chaos/fault_injector.hpp"
#include "tests/chaos/invariants.hpp"
#include "tests/chaos/trial_sandbox.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>

namespace orch::chaos {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int k_lease_ttl_s = 4;
constexpr int k_polite_max_per_host = 2;
// Longer than a snapshot's hooks take (about 0.4 s) over max_per_host, so that the
// delay, not the limit, spaces a host's claims and its invariant is tested.
constexpr double k_polite_host_delay_s = 0.5;

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string exit_text(const test::SpawnedProcess& p)
{
    if (!p.exited()) {
        return "running";
    }
    return p.term_signal() != 0 ? "signal " + std::to_string(p.term_signal()) : "exit " + std::to_string(p.exit_code());
}

// Watches the crawl while a process runs: records when it is first seen sealed.
class SealWatch {
public:
    SealWatch(const std::string& url, std::string crawl) : m_url(url), m_crawl(std::move(crawl)) {}
    void poll(Clock::time_point fault_at)
    {
        if (m_sealed_after >= 0) {
            return;
        }
        try {
            if (scalar(m_url, "SELECT status FROM crawl WHERE id = '" + m_crawl + "'") == "sealed") {
                m_sealed_after = seconds_since(fault_at);
            }
        } catch (const std::exception&) {
            // The server may be down (a PostgreSQL fault): try again later.
        }
    }
    // Waits for `p` to exit, polling the crawl; false when `timeout` passed first.
    bool wait(test::SpawnedProcess& p, std::chrono::seconds timeout, Clock::time_point fault_at)
    {
        auto deadline = Clock::now() + timeout;
        while (Clock::now() < deadline) {
            if (p.wait_for(std::chrono::milliseconds(250))) {
                poll(fault_at);
                return true;
            }
            poll(fault_at);
        }
        return false;
    }
    bool sealed() const { return m_sealed_after >= 0; }
    double sealed_after() const { return m_sealed_after; }

private:
    const std::string& m_url;
    std::string m_crawl;
    double m_sealed_after = -1;
};

// Waits until `fraction` of the crawl's snapshots are sealed (at most `limit`).
// The fault lands at a random point of the crawl's progress rather than after a
// fixed delay: how long a crawl takes depends on the machine and the build, and a
// fault injected after the crawl has ended tests nothing.
void wait_for_progress(const std::string& db_url, const std::string& crawl, int urls, double fraction,
                       std::chrono::seconds limit)
{
    const auto until = Clock::now() + limit;
    const auto wanted = static_cast<long>(fraction * urls);
    while (Clock::now() < until) {
        try {
            auto rows = query(db_url, "SELECT count(*) FROM snapshot WHERE status = 'sealed' AND crawl_id = '" +
                                          crawl + "'");
            if (!rows.empty() && std::stol(rows[0][0]) >= wanted) {
                return;
            }
        } catch (const std::exception&) {
            // The database may be restarting under an earlier trial's fault: keep waiting.
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

} // namespace

TrialResult run_trial(const TrialOptions& o)
{
    std::mt19937_64 rng(o.seed);
    TrialResult res;
    res.index = o.index;
    res.kind = o.kind;
    res.daemon = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    res.urls = o.quick ? std::uniform_int_distribution<int>(20, 30)(rng) : std::uniform_int_distribution<int>(20, 50)(rng);
    auto started = Clock::now();

    TrialSandbox sandbox("t" + std::to_string(o.index), o.kind == FaultKind::disk_full ? 8L << 20 : 0);
    write_chaos_plugin(sandbox.plugins(), sandbox.records(), o.kind, sandbox.root().string());
    // Half the crawls have per-host rules over three hosts, so that their claims
    // (one per statement, under the crawl's claim lock) meet the faults too.
    const bool polite = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    std::vector<std::string> urls;
    for (int i = 1; i <= res.urls; ++i) {
        const std::string host = polite ? "chaos-" + std::string(1, static_cast<char>('a' + i % 3)) + ".test" : "chaos.test";
        urls.push_back("http://" + host + "/" + std::to_string(o.index) + "/" + std::to_string(i));
    }
    std::string error;
    const HostRules rules = polite ? HostRules{k_polite_max_per_host, k_polite_host_delay_s} : HostRules{};
    auto crawl = sandbox.add_crawl(urls, error,
                                   polite ? std::vector<std::string>{"--max-per-host", std::to_string(rules.max_per_host),
                                                                     "--host-delay", fmt::format("{}", rules.delay_s)}
                                          : std::vector<std::string>{});
    if (crawl.empty()) {
        res.violations.push_back("setup: " + error);
        return res;
    }

    PgControl no_pg({});
    FaultInjector injector(sandbox, o.pg != nullptr ? *o.pg : no_pg, rng, k_lease_ttl_s, o.quick ? 5 : 10);
    SealWatch watch(sandbox.db_url(), crawl);

    // Phase 1: the system under fault.
    test::EnvChanges first_env;
    if (o.kind == FaultKind::pg_past_grace) {
        first_env["DB_OUTAGE_GRACE"] = std::to_string(k_past_grace_s);
    }
    auto first = sandbox.start_orchestrator(res.daemon, first_env);
    if (!is_hostile_hook(o.kind)) {
        const double fraction = std::uniform_real_distribution<double>(0.0, 0.6)(rng);
        std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the tree is up
        wait_for_progress(sandbox.db_url(), crawl, res.urls, fraction, std::chrono::seconds(10));
    }
    auto fault_at = Clock::now();
    const bool running_at_fault = !first->exited();
    auto report = injector.inject(o.kind, first->pid());
    res.injected = report.injected;
    res.detail = report.detail + (polite ? fmt::format("; crawl with --max-per-host {} --host-delay {} over 3 hosts",
                                                       rules.max_per_host, rules.delay_s)
                                         : "");
    if (res.daemon) {
        // A daemon never exits by itself: stop it once the crawl is sealed (or after 60 s).
        auto until = Clock::now() + std::chrono::seconds(60);
        while (!watch.sealed() && !first->exited() && Clock::now() < until) {
            first->wait_for(std::chrono::milliseconds(250));
            watch.poll(fault_at);
        }
        first->signal(SIGTERM);
        if (!watch.wait(*first, std::chrono::seconds(30), fault_at)) {
            res.violations.push_back("liveness: the daemon did not stop within 30 s of SIGTERM");
        }
    } else if (!watch.wait(*first, std::chrono::seconds(120), fault_at)) {
        res.violations.push_back("liveness: the one-shot orchestrator under fault still ran after 120 s");
    }
    first->signal(SIGKILL);
    first->wait_for(std::chrono::seconds(5));
    res.detail += "; first orchestrator " + exit_text(*first);
    sandbox.save_log("orchestrator-1", *first);
    if (o.pg != nullptr && o.pg->available() && !o.pg->running()) {
        o.pg->start();
    }

    // Phase 2: a fresh one-shot orchestrator recovers and finishes.
    auto second = sandbox.start_orchestrator(false);
    if (!watch.wait(*second, std::chrono::seconds(180), fault_at)) {
        res.violations.push_back("liveness: the recovery orchestrator still ran after 180 s");
        second->signal(SIGKILL);
        second->wait_for(std::chrono::seconds(5));
    } else if (second->exit_code() != 0) {
        res.violations.push_back("recovery: the fresh orchestrator ended with " + exit_text(*second));
    }
    res.detail += "; recovery orchestrator " + exit_text(*second);
    sandbox.save_log("orchestrator-2", *second);
    res.recover_s = watch.sealed_after();

    if (is_hostile_hook(o.kind)) {
        // Present from the start, the hostile hook is the fault only where it ran on its URLs.
        const int hostile = hostile_runs(sandbox.records(), o.kind);
        res.injected = hostile > 0;
        res.detail += "; the hostile hook began " + std::to_string(hostile) + " run(s) on the URLs it misbehaves on";
    }

    try {
        auto inv = check_invariants(sandbox, {crawl}, urls.size(), rules);
        if (polite) {
            res.detail += "; at most " + std::to_string(inv.most_per_host) + " of a host ran hooks at once";
        }
        res.violations.insert(res.violations.end(), inv.violations.begin(), inv.violations.end());
        res.notes = inv.notes;
        // The server is away for less than DB_OUTAGE_GRACE (30 s by default): every
        // process waits for it with its children running on, so the first
        // orchestrator ends as it would have without the fault, and nothing runs twice.
        const bool within_grace = o.kind == FaultKind::pg_restart || o.kind == FaultKind::pg_stop;
        if (within_grace && res.injected) {
            if (first->exit_code() != 0) {
                res.violations.push_back("ride_through: the orchestrator under the outage ended with " +
                                         exit_text(*first) + ", not 0");
            }
            for (const auto& note : inv.notes) {
                res.violations.push_back("ride_through: " + note);
            }
        }
        // Past the grace the old crash-only path runs: every process exits 4
        // (reruns are at-least-once notes), and phase 2 must find everything.
        if (o.kind == FaultKind::pg_past_grace && res.injected && running_at_fault && first->exit_code() != 4) {
            res.violations.push_back("crash_only: the orchestrator under an outage past DB_OUTAGE_GRACE ended with " +
                                     exit_text(*first) + ", not 4");
        }
    } catch (const std::exception& e) {
        res.violations.push_back(std::string("check: ") + e.what());
    }
    if (!res.violations.empty()) {
        sandbox.keep();
    }
    res.total_s = seconds_since(started);
    return res;
}

} // namespace orch::chaos
