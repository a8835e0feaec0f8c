#include "snapshot_worker/planned_hook.hpp"

#include "common/hooks/hook_launch_request.hpp"

namespace orch {

LaunchRequest launch_request_for(const SnapshotRecord& snapshot, const std::filesystem::path& snap_dir,
                                 const PlannedHook& planned, bool background)
{
    // The environment build_hook_env() gives it in this snapshot: the crawl's
    // (HookSetup) and this snapshot's directory, a path of ours (no NUL, no
    // secret-looking name).
    auto env = planned.env;
    env["SNAP_DIR"] = snap_dir.string();
    auto req = hook_launch_request(planned.hook, planned.config, std::move(env),
                                   HookArguments{snapshot.url, snapshot.id, snapshot.crawl_id},
                                   snap_dir / planned.hook.plugin, background);
    req.labels.snapshot_id = snapshot.id;
    req.labels.archive_result_id = planned.result_id;
    req.owner_logs = true; // "hook started" and "hook finished" say it all
    return req;
}

} // namespace orch
