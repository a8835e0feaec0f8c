#pragma once

#include <string>
#include <vector>

namespace orch::chaos {

// What a trial does to the system. Signal and infrastructure faults strike at a
// random moment; hostile hooks are present from the start on some URLs.
enum class FaultKind {
    kill_orchestrator,
    kill_crawl_worker,
    kill_snapshot_worker,
    kill_hook,
    stop_worker,        // SIGSTOP a worker past its lease, then SIGCONT
    pg_restart,         // pg_ctl restart of the trial's own cluster
    pg_stop,            // server down for ~10 s (shorter in quick mode), within DB_OUTAGE_GRACE
    pg_past_grace,      // the same with DB_OUTAGE_GRACE at 2 s: everything exits 4 (crash-only)
    disk_full,          // the data directory (a small tmpfs) fills up
    pause_resume,       // an operator pauses the crawl (CLI), then resumes it 0-3 s later
    hook_flood,         // a hook floods stdout (huge line + many lines)
    hook_fork,          // a hook forks 1,000 children and exits
    hook_ignore_term,   // a hook ignores SIGTERM past its timeout
    hook_setsid,        // a hook double-forks + setsid (also with env cleared)
    hook_hang,          // a hook never exits
};

// DB_OUTAGE_GRACE (s) of the processes under a pg_past_grace fault: shorter than
// the outage (5 s quick, 10 s full).
inline constexpr int k_past_grace_s = 2;

const std::vector<FaultKind>& all_fault_kinds();
std::string to_string(FaultKind kind);
bool is_hostile_hook(FaultKind kind);
bool needs_own_cluster(FaultKind kind);

} // namespace orch::chaos
