#include "tests/chaos/fault_kind.hpp"

namespace orch::chaos {

const std::vector<FaultKind>& all_fault_kinds()
{
    static const std::vector<FaultKind> k_all = {
        FaultKind::kill_orchestrator, FaultKind::kill_crawl_worker, FaultKind::kill_snapshot_worker,
        FaultKind::kill_hook,         FaultKind::stop_worker,       FaultKind::pg_restart,
        FaultKind::pg_stop,           FaultKind::pg_past_grace,     FaultKind::disk_full,
        FaultKind::pause_resume,
        FaultKind::hook_flood,        FaultKind::hook_fork,         FaultKind::hook_ignore_term,
        FaultKind::hook_setsid,       FaultKind::hook_hang};
    return k_all;
}

std::string to_string(FaultKind kind)
{
    switch (kind) {
    case FaultKind::kill_orchestrator: return "kill_orchestrator";
    case FaultKind::kill_crawl_worker: return "kill_crawl_worker";
    case FaultKind::kill_snapshot_worker: return "kill_snapshot_worker";
    case FaultKind::kill_hook: return "kill_hook";
    case FaultKind::stop_worker: return "stop_worker";
    case FaultKind::pg_restart: return "pg_restart";
    case FaultKind::pg_stop: return "pg_stop";
    case FaultKind::pg_past_grace: return "pg_past_grace";
    case FaultKind::disk_full: return "disk_full";
    case FaultKind::pause_resume: return "pause_resume";
    case FaultKind::hook_flood: return "hook_flood";
    case FaultKind::hook_fork: return "hook_fork";
    case FaultKind::hook_ignore_term: return "hook_ignore_term";
    case FaultKind::hook_setsid: return "hook_setsid";
    case FaultKind::hook_hang: return "hook_hang";
    }
    return "unknown";
}

bool is_hostile_hook(FaultKind kind)
{
    return kind >= FaultKind::hook_flood;
}

bool needs_own_cluster(FaultKind kind)
{
    return kind == FaultKind::pg_restart || kind == FaultKind::pg_stop || kind == FaultKind::pg_past_grace;
}

} // namespace orch::chaos
