#pragma once

#include "common/base/exit_codes.hpp"
#include "common/config/cli_options.hpp"
#include "snapshot_worker/snapshot_worker_options.hpp"

namespace orch {

// Runs every enabled Snapshot hook of one snapshot and seals it, then, with
// `continue_with_crawl`, the next due snapshots of the same crawl. The return
// value says how it ended (ok = every snapshot it took is sealed, lease_lost,
// interrupted, ...). Throws Error subclasses for what main() maps to exit codes.
ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options);

} // namespace orch
