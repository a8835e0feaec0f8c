#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>

#include <iostream>

namespace orch {
namespace {

constexpr const char* k_reason = "cancelled by operator";
constexpr const char* k_lock = "SELECT status, coalesce(outcome, ''), lease_owner IS NOT NULL, coalesce(lease_owner::text, '') "
                               "FROM crawl WHERE id = $1 FOR UPDATE";
// Snapshot leases still held: a snapshot worker may run for this crawl.
constexpr const char* k_live_snapshot_leases =
    "SELECT count(*) FROM snapshot WHERE crawl_id = $1 AND lease_owner IS NOT NULL AND lease_expires_at > now()";
constexpr const char* k_fail_results =
    "UPDATE archive_result ar SET status = 'failed', error = $2, end_ts = now(), modified_at = now() "
    "FROM snapshot s WHERE s.id = ar.snapshot_id AND s.crawl_id = $1 AND s.status <> 'sealed' "
    "  AND ar.status IN ('queued', 'started')";

} // namespace

void cancel_crawl(pqxx::connection& conn, const std::string& id)
{
    prepare_statements(conn, {{"cancel_lock", k_lock}, {"cancel_live_snapshot_leases", k_live_snapshot_leases},
                              {"cancel_fail_results", k_fail_results}});

    pqxx::work tx(conn);
    auto row = tx.exec_prepared("cancel_lock", id);
    if (row.empty()) {
        throw NotFound(fmt::format("crawl {} not found", id));
    }
    auto status = row[0][0].as<std::string>();
    if (status == "sealed") {
        std::cout << fmt::format("crawl {} is already sealed ({}); nothing to cancel\n", id, row[0][1].as<std::string>());
        return;
    }
    bool leased = row[0][2].as<bool>();
    bool live_snapshots = tx.exec_prepared1("cancel_live_snapshot_leases", id)[0].as<long>() > 0;
    if (leased || live_snapshots) {
        // A worker runs it: it sees the NOTIFY (crawl_cancel trigger) or its poll, stops
        // its snapshot workers and seals the crawl cancelled itself.
        work_states::request_cancel(tx, id);
        Event e{"crawl.cancel_requested", "cancel requested by operator", id};
        if (leased) {
            e.detail["held_by"] = row[0][3].as<std::string>();
        }
        record_event(tx, "cli", e);
        tx.commit();
        std::cout << fmt::format("cancel requested for crawl {}{}; its crawl worker stops it\n", id,
                                 leased ? " (held by process " + row[0][3].as<std::string>() + ")" : "");
        return;
    }
    // Nobody works on it: seal it here, with its snapshots and results terminal.
    tx.exec_prepared0("cancel_fail_results", id, k_reason);
    auto sealed = work_states::seal_cancelled_snapshots(tx, id, k_reason);
    work_states::seal_cancelled_crawl(tx, id, k_reason);
    Event e{"crawl.cancelled", "cancelled by operator; no worker held it", id};
    e.detail["snapshots_sealed"] = sealed;
    record_event(tx, "cli", e);
    tx.commit();
    std::cout << fmt::format("crawl {} cancelled ({} unfinished snapshots sealed)\n", id, sealed);
}

} // namespace orch
