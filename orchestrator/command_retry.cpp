#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/ids.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

namespace orch {
namespace {

constexpr const char* k_crawl_of_snapshot = "SELECT crawl_id FROM snapshot WHERE id = $1";
constexpr const char* k_lock_crawl =
    "SELECT status, lease_owner IS NOT NULL AND lease_expires_at > now(), coalesce(lease_owner::text, ''), "
    "       status = 'sealed' AND outcome <> 'succeeded' "
    "FROM crawl WHERE id = $1 FOR UPDATE";
// The crawl's snapshots ($2 NULL) or one snapshot, locked: which are running, which to retry.
constexpr const char* k_lock_snapshots =
    "SELECT s.id, s.status, s.lease_owner IS NOT NULL AND s.lease_expires_at > now(), "
    "       coalesce(s.lease_owner::text, ''), "
    "       s.status = 'sealed' AND (s.outcome <> 'succeeded' OR EXISTS ("
    "           SELECT 1 FROM archive_result ar WHERE ar.snapshot_id = s.id AND ar.status = 'failed')) "
    "FROM snapshot s WHERE s.crawl_id = $1 AND ($2::uuid IS NULL OR s.id = $2::uuid) "
    "ORDER BY s.id FOR UPDATE OF s";
constexpr const char* k_requeue_results =
    "UPDATE archive_result SET status = 'queued', error = NULL, start_ts = NULL, end_ts = NULL, modified_at = now() "
    "WHERE snapshot_id = ANY ($1::uuid[]) AND status = 'failed'";
// The snapshots' and the crawl's own requeue are work_states::requeue_snapshots
// and work_states::requeue_crawl.

} // namespace

void command_retry(const CommonOptions& options, const std::string& raw_id)
{
    auto id = require_uuid(raw_id, "snapshot or crawl id");
    OpsSession session(options, OpsSession::Schema::migrated,
                       {{"retry_crawl_of_snapshot", k_crawl_of_snapshot}, {"retry_lock_crawl", k_lock_crawl},
                        {"retry_lock_snapshots", k_lock_snapshots}, {"retry_requeue_results", k_requeue_results}});
    pqxx::work tx(session.conn());
    std::string crawl_id = id;
    std::optional<std::string> snapshot_id;
    if (auto r = tx.exec_prepared("retry_crawl_of_snapshot", id); !r.empty()) {
        crawl_id = r[0][0].as<std::string>();
        snapshot_id = id;
    }
    auto crawl = tx.exec_prepared("retry_lock_crawl", crawl_id);
    if (crawl.empty()) {
        throw NotFound(fmt::format("no snapshot or crawl with id {}", id));
    }
    if (crawl[0][1].as<bool>()) {
        throw LeaseLost(fmt::format("crawl {} is running (process {} holds it); retry once it is sealed, or cancel it "
                                    "first",
                                    crawl_id, crawl[0][2].as<std::string>()));
    }
    std::vector<std::string> targets;
    for (const auto& s : tx.exec_prepared("retry_lock_snapshots", crawl_id, snapshot_id)) {
        if (s[2].as<bool>()) {
            throw LeaseLost(fmt::format("snapshot {} is running (process {} holds it); retry once it is sealed",
                                        s[0].as<std::string>(), s[3].as<std::string>()));
        }
        if (s[4].as<bool>()) {
            targets.push_back(s[0].as<std::string>());
        }
    }
    // A crawl sealed before it had snapshots (cancelled while queued, failed Crawl hook) runs again as a whole.
    bool requeue_crawl_alone = !snapshot_id && crawl[0][3].as<bool>();
    if (targets.empty() && requeue_crawl_alone) {
        auto crawl_status = work_states::requeue_crawl(tx, crawl_id);
        record_event(tx, "cli", Event{"crawl.retried", "crawl queued again by operator", crawl_id});
        tx.commit();
        std::cout << fmt::format("queued again: crawl {} is {}\n", crawl_id, crawl_status);
        return;
    }
    if (targets.empty()) {
        std::cout << fmt::format("nothing to retry: {} {} has no failed, partial or unsuccessful sealed snapshot\n",
                                 snapshot_id ? "snapshot" : "crawl", id);
        return;
    }
    // UUIDs need no quoting inside an array literal.
    auto array = fmt::format("{{{}}}", fmt::join(targets, ","));
    auto results = tx.exec_prepared("retry_requeue_results", array).affected_rows();
    work_states::requeue_snapshots(tx, array);
    auto crawl_status = work_states::requeue_crawl(tx, crawl_id);
    Event e{snapshot_id ? "snapshot.retried" : "crawl.retried",
            fmt::format("{} snapshot{} and {} failed result{} queued again by operator", targets.size(),
                        targets.size() == 1 ? "" : "s", results, results == 1 ? "" : "s"),
            crawl_id, snapshot_id};
    e.detail["snapshots"] = targets.size();
    e.detail["results"] = results;
    record_event(tx, "cli", e);
    tx.commit();
    std::cout << fmt::format("queued again: {} snapshot{}, {} failed result{}; crawl {} is {}\n", targets.size(),
                             targets.size() == 1 ? "" : "s", results, results == 1 ? "" : "s", crawl_id, crawl_status);
}

} // namespace orch
