#include "orchestrator/orchestrator_loop.hpp"

#include "common/db/database_outage.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/log.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/recorder/process_table.hpp"
#include "common/recorder/recovery.hpp"
#include "orchestrator/orchestrator_metrics.hpp"
#include "orchestrator/work_queue.hpp"

#include <fmt/format.h>

#include <csignal>

// OrchestratorLoop's crash recovery: at start, every recovery interval, after a
// crawl worker's exit and at shutdown.
namespace orch {

// Crash recovery for this machine: ends stuck lease holders, tears down orphaned
// trees, closes stale rows, and frees leases whose owner is gone.
void OrchestratorLoop::recover()
{
    // Most passes find nothing and write nothing: this line is how a pass is
    // seen at all (a test tells a timed wake-up from a notified one by it).
    log::debug("recovery pass");
    // Right after a database outage every lease may have expired meanwhile: its
    // holder is no stalled one until it had a lease's time to renew.
    const auto back = last_reconnect();
    if (!back || Clock::now() - *back >= m_lease_ttl) {
        for (const auto& row_id : stalled_lease_owners(m_conn, m_machine.id)) {
            kill_row(row_id);
        }
    }
    RecoveryOptions ro;
    ro.containment = m_containment;
    ro.self_row_id = m_self_id;
    ro.grace = std::chrono::milliseconds(1000);
    // Trees nest (crawl worker → snapshot workers → hooks): a pass can orphan the next level.
    RecoveryReport total;
    for (int pass = 0; pass < 3; ++pass) {
        auto report = cleanup_stale_running(m_conn, m_machine.id, ro);
        if (m_supervisor != nullptr) {
            m_supervisor->process_events();
        }
        total.lost += report.lost;
        total.killed_on_recovery += report.killed_on_recovery;
        total.pid_reused += report.pid_reused;
        total.boot_changed += report.boot_changed;
        if (report.killed_on_recovery == 0 && report.lost == 0) {
            break;
        }
    }
    auto leases = release_dead_leases(m_conn);
    count_leases_recovered(leases.crawls, leases.snapshots);
    if (total.lost + total.killed_on_recovery + total.pid_reused + total.boot_changed + leases.crawls +
            leases.snapshots >
        0) {
        log::info("recovery", {{"rows_lost", std::to_string(total.lost)},
                               {"trees_killed", std::to_string(total.killed_on_recovery)},
                               {"pid_reused", std::to_string(total.pid_reused)},
                               {"boot_changed", std::to_string(total.boot_changed)},
                               {"crawl_leases_freed", std::to_string(leases.crawls)},
                               {"snapshot_leases_freed", std::to_string(leases.snapshots)}});
        Event e{"recovery.cleaned",
                fmt::format("recovery closed {} stale rows, killed {} orphaned trees, freed {} leases",
                            total.lost + total.pid_reused + total.boot_changed, total.killed_on_recovery,
                            leases.crawls + leases.snapshots)};
        e.process_id = m_self_id;
        e.detail = {{"rows_lost", total.lost},           {"trees_killed", total.killed_on_recovery},
                    {"pid_reused", total.pid_reused},    {"boot_changed", total.boot_changed},
                    {"crawl_leases_freed", leases.crawls}, {"snapshot_leases_freed", leases.snapshots}};
        record_event(m_conn, "orchestrator", e);
    }
    register_machine(m_conn, m_machine, std::nullopt);
}

// SIGKILLs the process a row names, only after proving it is still that process.
void OrchestratorLoop::kill_row(const std::string& row_id)
{
    auto boot_id = read_boot_id();
    for (const auto& row : process_table::live_rows(m_conn, m_machine.id)) {
        if (row.id != row_id || !row.identity || row.id == m_self_id) {
            continue;
        }
        if (auto fd = open_verified(*row.identity, boot_id)) {
            log::warn("killing a worker whose lease expired while it still ran (stopped or hung)",
                      {{"process", row_id}, {"pid", std::to_string(row.identity->pid)}});
            fd->send_signal(SIGKILL);
        }
    }
}

} // namespace orch
