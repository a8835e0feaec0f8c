#pragma once

#include "common/base/exit_codes.hpp"
#include "common/work/lease.hpp"
#include "common/recorder/self_registration.hpp"
#include "common/base/stop_signals.hpp"
#include "common/recorder/supervisor.hpp"
#include "common/work/url_filter.hpp"
#include "snapshot_worker/snapshot_batch.hpp"
#include "snapshot_worker/snapshot_run.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "snapshot_worker/snapshot_worker_options.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

// The snapshots a snapshot worker runs, one after another: the one it was
// started for, then, with --continue, the crawl's next due ones it claims
// itself (one at a time, or in batches while they are quick: snapshot_batch.hpp).
namespace orch {

// What every snapshot run by this process shares: they all belong to one crawl.
struct WorkerScope {
    std::vector<HookSetup> hooks;
    const UrlFilter* filter = nullptr;
    std::size_t parallelism = 1;
    std::chrono::milliseconds teardown_grace{10'000};
    std::filesystem::path data_dir;
    int max_snapshots = 1000;       // SNAPSHOT_WORKER_MAX_SNAPSHOTS
    int batch_size = 1;             // SNAPSHOT_WORKER_BATCH, 1 where batches are not allowed
    std::chrono::seconds ttl{30};   // LEASE_TTL
};

// The hooks' ids, as the statements that create results take them.
std::vector<Hook> planned_hooks(const WorkerScope& scope);

// Runs the leased snapshot (`snapshot`, its `store` and `lease`, none when it
// was sealed already), seals it, and with options.continue_with_crawl goes on
// with the crawl's next due snapshots until none is due, a stop signal came
// or scope.max_snapshots were run (counted in `taken`). Whatever `batch` holds
// when it returns or throws is the caller's to settle (SnapshotBatch::seal_held,
// release_ahead). Returns how it ended (ok, interrupted, or a run's code);
// throws LeaseLost when a lease is gone, and what libpqxx throws.
ExitCode run_continuing(pqxx::connection& conn, Supervisor& supervisor, StopSignals& stop, const WorkerScope& scope,
                        SnapshotBatch& batch, const SnapshotWorkerOptions& options, const SelfRow& self,
                        SnapshotRecord& snapshot, std::unique_ptr<SnapshotStore>& store, std::optional<Lease>& lease,
                        int& taken);

} // namespace orch
