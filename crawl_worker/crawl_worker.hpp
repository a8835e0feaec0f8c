#pragma once

#include "common/app/worker_command_line.hpp"
#include "common/config/cli_options.hpp"
#include "common/base/exit_codes.hpp"

#include <string>

namespace orch {

struct CrawlWorkerOptions : WorkerArguments {
    std::string crawl_id;
    int max_snapshot_workers = 8;  // snapshot workers of this crawl at once
};

// Owns one crawl from start to seal. The return value says what happened: ok
// (sealed, or already was), interrupted (stopped by a signal, or its crawl is or
// became paused; released, resumable), lease_lost, or config when a snapshot
// worker refused its configuration. Throws orch::Error for the rest.
ExitCode run_crawl_worker(const CommonOptions& common, const CrawlWorkerOptions& options);

} // namespace orch
