#pragma once

#include "common/supervision/containment.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace orch {

struct RecoveryOptions {
    // Must match the supervisors' containment options (same scope): only
    // cgroups under <root>/<scope> are considered.
    ContainmentOptions containment;
    // The recovering process's own row: never treated as stale.
    std::optional<std::string> self_row_id;
    // SIGTERM grace for orphaned trees before SIGKILL (Chromium flushes its profile).
    std::chrono::milliseconds grace{1000};
    std::chrono::milliseconds kill_timeout{5000};
};

struct RecoveryReport {
    int lost = 0;               // process gone; exit status unknown
    int pid_reused = 0;         // pid now names another process; never signalled
    int boot_changed = 0;       // row from an earlier boot; never signalled
    int killed_on_recovery = 0; // orphaned tree of a dead supervisor, torn down
    int untouched = 0;          // alive and supervised by a live process
    std::vector<std::string> closed_rows;
};

// Crash recovery for this machine. Rows still queued/running whose process is
// gone, reused or from another boot are closed with that end_reason and a
// NULL exit code; their pid is never signalled. Trees of a dead supervisor
// (found by cgroup leaf or cookie, identity-verified) are sent SIGTERM, given
// `grace`, then SIGKILLed, and their rows closed as killed_on_recovery.
// Cgroup directories whose supervisor row is not in this database are left
// alone, so concurrent instances (other databases, other scopes) are never
// touched. Blocks for at most grace + kill_timeout. Killed processes that were
// our children stay zombies until reaped (Supervisor::recover reaps them).
RecoveryReport cleanup_stale_running(pqxx::connection& conn, const std::string& machine_id,
                                     const RecoveryOptions& options);

} // namespace orch
