#pragma once

#include <chrono>
#include <string>

namespace orch {

// How an orchestrator runs, from its command line and settings (main.cpp).
struct RunOptions {
    bool daemon = false;             // run until stopped; else until nothing is due or running
    bool takeover = false;           // ask a running orchestrator to stop, then take over
    int max_crawl_workers = 4;       // crawl_worker processes of this orchestrator at once
    int max_snapshot_workers = 8;    // passed to each crawl_worker
    std::string plugins_dir;         // passed to workers
    std::chrono::seconds poll_interval{5};    // safety-net poll; NOTIFY wakes earlier
    std::chrono::seconds idle_window{2};      // one-shot: exit when nothing is due within this
    std::chrono::seconds recovery_interval{15};
    std::chrono::seconds stop_grace{60};      // SIGTERM to crawl workers, then SIGKILL
    std::string metrics_listen;      // HOST:PORT for Prometheus scrapes; empty = no metrics server
};

} // namespace orch
