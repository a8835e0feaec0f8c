#pragma once

#include "common/base/env_map.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/recorder/supervisor.hpp"
#include "snapshot_worker/snapshot_store.hpp"

#include <filesystem>
#include <string>

// The hooks a snapshot worker runs: planned once per crawl, then per snapshot
// the launch request each one's start is.
namespace orch {

// A hook every snapshot of this worker runs, as planned once for its crawl: the
// hook, its effective config, and its environment but SNAP_DIR (build_hook_env
// with the crawl's context: the same for every snapshot, so not built again at
// each launch).
struct HookSetup {
    Hook hook;
    PluginConfig config;
    EnvMap env;
};

// A hook of this snapshot, ready to run: its setup (owned by the worker, which
// outlives every run) and its result row.
struct PlannedHook {
    const Hook& hook;
    const PluginConfig& config;
    const EnvMap& env;
    std::string result_id;
};

// The launch request of `planned` in `snapshot`, whose directory is
// `snap_dir`: its argv, its environment with SNAP_DIR, its directory (the
// plugin's under `snap_dir`, created by Supervisor::launch), its timeout (none
// for a background hook, whose stop the teardown grace bounds) and its row's
// links. Throws std::invalid_argument when its argv is impossible
// (build_hook_argv).
LaunchRequest launch_request_for(const SnapshotRecord& snapshot, const std::filesystem::path& snap_dir,
                                 const PlannedHook& planned, bool background);

} // namespace orch
