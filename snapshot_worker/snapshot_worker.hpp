#pragma once

#include "common/cli_options.hpp"
#include "common/exit_codes.hpp"

#include <string>

namespace orch {

struct SnapshotWorkerOptions {
    std::string snapshot_id;
    std::string process_id;   // row prepared by the parent to adopt; empty = register itself
    std::string plugins_dir;  // extra user plugins (PLUGINS_DIR)
};

// Runs every enabled Snapshot hook of one snapshot and seals it. The return value
// says what happened (ok = sealed, lease_lost, interrupted, ...).
ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options);

} // namespace orch
