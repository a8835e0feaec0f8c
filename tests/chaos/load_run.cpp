#include "tests/chaos/load_run.hpp"

#include "tests/chaos/chaos_hooks.hpp"
#include "tests/chaos/db_query.hpp"
#include "tests/chaos/invariants.hpp"
#include "tests/chaos/os_scan.hpp"
#include "tests/chaos/trial_sandbox.hpp"

#include <signal.h>

#include <chrono>
#include <map>
#include <numeric>
#include <set>

namespace orch::chaos {

namespace {

using Clock = std::chrono::steady_clock;

struct Series {
    std::set<std::string> processes;
    std::vector<long> rss;   // per sample: the largest RSS of this kind (orchestrator/crawl: the process)
    long max_rss = 0;
    long max_hwm = 0;
};

long mean(const std::vector<long>& v, std::size_t from, std::size_t to)
{
    if (to <= from) {
        return 0;
    }
    return std::accumulate(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to), 0L) /
           static_cast<long>(to - from);
}

} // namespace

LoadResult run_load(const std::string& name, int crawls, int urls_per_crawl, int crawl_workers, int snapshot_workers,
                    int timeout_s)
{
    LoadResult res;
    res.name = name;
    res.crawls = crawls;
    res.urls = crawls * urls_per_crawl;
    TrialSandbox sandbox("load");
    write_noop_plugin(sandbox.plugins());
    std::vector<std::string> ids;
    for (int c = 0; c < crawls; ++c) {
        std::vector<std::string> urls;
        for (int i = 1; i <= urls_per_crawl; ++i) {
            urls.push_back("http://load.test/" + std::to_string(c) + "/" + std::to_string(i));
        }
        std::string error;
        auto id = sandbox.add_crawl(urls, error);
        if (id.empty()) {
            res.violations.push_back("setup: " + error);
            return res;
        }
        ids.push_back(id);
    }
    auto started = Clock::now();
    auto orch = sandbox.start_orchestrator(false, {{"LEASE_TTL", "30"}, {"TEARDOWN_GRACE", "2"}},
                                           {"--max-crawl-workers", std::to_string(crawl_workers),
                                            "--max-snapshot-workers", std::to_string(snapshot_workers)});
    std::map<std::string, Series> series;
    auto deadline = started + std::chrono::seconds(timeout_s);
    while (!orch->wait_for(std::chrono::milliseconds(1000)) && Clock::now() < deadline) {
        std::map<std::string, long> sample;
        try {
            for (const auto& r : query(sandbox.db_url(),
                                       "SELECT pid, start_ticks, CASE WHEN process_type = 'orchestrator' THEN "
                                       "'orchestrator' ELSE coalesce(worker_type, 'unassigned') || '_worker' END FROM process WHERE "
                                       "status = 'running' AND process_type IN ('orchestrator', 'worker') AND "
                                       "pid IS NOT NULL AND start_ticks IS NOT NULL")) {
                auto pid = std::stoi(r[0]);
                if (!same_process_alive(pid, std::stoull(r[1]))) {
                    continue;
                }
                auto m = read_memory(pid);
                auto& s = series[r[2]];
                s.processes.insert(r[0] + "/" + r[1]);
                s.max_rss = std::max(s.max_rss, m.rss_kb);
                s.max_hwm = std::max(s.max_hwm, m.hwm_kb);
                sample[r[2]] = std::max(sample[r[2]], m.rss_kb);
            }
        } catch (const std::exception&) {
        }
        for (const auto& [kind, rss] : sample) {
            series[kind].rss.push_back(rss);
        }
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (!orch->exited()) {
        res.violations.push_back("liveness: not finished within " + std::to_string(timeout_s) + " s");
        orch->signal(SIGTERM);
        if (!orch->wait_for(std::chrono::seconds(30))) {
            orch->signal(SIGKILL);
            orch->wait_for(std::chrono::seconds(5));
        }
    } else if (orch->exit_code() != 0) {
        res.violations.push_back("orchestrator exited " + std::to_string(orch->exit_code()));
    }
    sandbox.save_log("orchestrator", *orch);
    for (const auto& [kind, s] : series) {
        MemoryFigures f;
        f.kind = kind;
        f.processes = static_cast<int>(s.processes.size());
        auto q = s.rss.size() / 4;
        f.first_rss_kb = mean(s.rss, 0, std::max<std::size_t>(q, 1));
        f.last_rss_kb = mean(s.rss, s.rss.size() - std::max<std::size_t>(q, 1), s.rss.size());
        f.max_rss_kb = s.max_rss;
        f.max_hwm_kb = s.max_hwm;
        // Long-lived processes must stay flat: at most +25 % + 8 MB from the first to the last quarter.
        bool long_lived = kind == "orchestrator" || (kind == "crawl_worker" && crawls == 1);
        if (long_lived && s.rss.size() >= 8 && f.last_rss_kb > f.first_rss_kb * 5 / 4 + 8192) {
            res.violations.push_back("memory: " + kind + " grew from " + std::to_string(f.first_rss_kb) + " kB to " +
                                     std::to_string(f.last_rss_kb) + " kB");
        }
        res.memory.push_back(f);
    }
    try {
        auto inv = check_invariants(sandbox, ids, static_cast<std::size_t>(urls_per_crawl));
        res.violations.insert(res.violations.end(), inv.violations.begin(), inv.violations.end());
    } catch (const std::exception& e) {
        res.violations.push_back(std::string("check: ") + e.what());
    }
    if (!res.violations.empty()) {
        sandbox.keep();
    }
    return res;
}

} // namespace orch::chaos
