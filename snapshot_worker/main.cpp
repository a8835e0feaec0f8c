#include "common/app/worker_command_line.hpp"
#include "snapshot_worker/snapshot_worker.hpp"

#include <cstdio>

#include <unistd.h>

int main(int argc, char** argv)
{
    using namespace orch;
    SnapshotWorkerOptions options;
    WorkerCommandLine command_line("snapshot",
                                   "Runs one snapshot's hooks in step order and seals the snapshot (with --continue, "
                                   "then the crawl's next due ones).",
                                   options.snapshot_id, options);
    auto& app = command_line.app();
    app.add_flag("--continue", options.continue_with_crawl,
                 "then run the crawl's next due snapshots until none is due (internal: for crawl workers)");
    command_line.add_plugins_dir();
    app.add_option("--lease-claimed-at", options.lease_claimed_at_ns,
                   "CLOCK_MONOTONIC ns when the parent leased the snapshot to the row it prepared (internal)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--attempt", options.attempt, "the attempt that lease counted (internal)")
        ->needs("--lease-claimed-at")
        ->check(CLI::NonNegativeNumber);
    const int code = command_line.run(
        argc, argv, [&](const CommonOptions& common) { return run_snapshot_worker(common, options); });
    // Everything this process owns is closed by now (its connection, its hooks'
    // trees, its leaves); the static destructors and the libraries' clean-up
    // have nothing left to save, and the crawl worker waits on our exit, on the
    // path from the last snapshot's seal to the crawl's. Log lines are written
    // unbuffered (common/base/log.cpp); stdio is flushed.
    std::fflush(nullptr);
    ::_exit(code);
}
