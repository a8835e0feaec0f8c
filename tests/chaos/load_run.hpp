#pragma once

#include <string>
#include <vector>

namespace orch::chaos {

// Memory of one kind of process over a load run, from VmRSS/VmHWM of the pids
// in running `process` rows, sampled once a second.
struct MemoryFigures {
    std::string kind;        // orchestrator | crawl_worker | snapshot_worker
    int processes = 0;       // distinct processes sampled
    long first_rss_kb = 0;   // mean of the first quarter of the samples (long-lived kinds)
    long last_rss_kb = 0;    // mean of the last quarter
    long max_rss_kb = 0;
    long max_hwm_kb = 0;
};

struct LoadResult {
    std::string name;
    int crawls = 0;
    int urls = 0;
    double seconds = 0;
    std::vector<MemoryFigures> memory;
    std::vector<std::string> violations;  // invariants, and "memory: ..." when a long-lived process grew
};

// `crawls` crawls of `urls_per_crawl` URLs each, no-op hooks, one one-shot
// orchestrator with `crawl_workers` / `snapshot_workers`, bounded by `timeout_s`.
LoadResult run_load(const std::string& name, int crawls, int urls_per_crawl, int crawl_workers,
                    int snapshot_workers, int timeout_s);

} // namespace orch::chaos
