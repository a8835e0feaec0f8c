#pragma once

#include "common/app/worker_command_line.hpp"

#include <optional>
#include <string>

namespace orch {

// What one snapshot worker is asked to do, from its command line (main.cpp).
struct SnapshotWorkerOptions : WorkerArguments {
    std::string snapshot_id;
    // After the first snapshot, keep claiming the crawl's next due snapshots for
    // ourselves (fenced on the parent crawl worker's crawl lease) until none is
    // due: one process and one connection serve many snapshots. Only for a worker
    // whose row was prepared by a crawl worker.
    bool continue_with_crawl = false;
    // Set by the crawl worker that claimed the snapshot for `process_id` just
    // before starting us (for the row it prepared): when it claimed (CLOCK_MONOTONIC ns) and the attempt
    // that claim counted. The lease is then taken as granted, without a round
    // trip; the first write for the snapshot is fenced on it.
    std::optional<long long> lease_claimed_at_ns;
    int attempt = 0;
};

} // namespace orch
