#include "common/work/work_states.hpp"

// work_states: the operators' transitions (cancel, pause, resume, retry), each
// one statement of the command's transaction.
namespace orch::work_states {
namespace {

// Prepared on the transaction's connection as "work_states.<name>" (a no-op when
// it is already; the server prepares it at its first use): each command sends a
// statement's text once.
std::string prepared(pqxx::work& tx, const char* name, const char* definition)
{
    auto full = std::string("work_states.") + name;
    tx.conn().prepare(full, definition);
    return full;
}

} // namespace

void request_cancel(pqxx::work& tx, const std::string& crawl_id)
{
    tx.exec_prepared0(prepared(tx, "request_cancel",
                               "UPDATE crawl SET cancel_requested_at = coalesce(cancel_requested_at, now()), "
                               "modified_at = now() WHERE id = $1"),
                      crawl_id);
}

long seal_cancelled_snapshots(pqxx::work& tx, const std::string& crawl_id, const std::string& error)
{
    return static_cast<long>(
        tx.exec_prepared(prepared(tx, "seal_cancelled_snapshots",
                                  "UPDATE snapshot SET status = 'sealed', outcome = 'cancelled', error = $2, "
                                  "sealed_at = clock_timestamp(), retry_at = NULL, "
                                  " lease_owner = NULL, lease_expires_at = NULL, modified_at = now() "
                                  "WHERE crawl_id = $1 AND status <> 'sealed'"),
                         crawl_id, error)
            .affected_rows());
}

void seal_cancelled_crawl(pqxx::work& tx, const std::string& crawl_id, const std::string& reason)
{
    tx.exec_prepared0(prepared(tx, "seal_cancelled_crawl",
                               "UPDATE crawl SET status = 'sealed', outcome = 'cancelled', seal_reason = $2, "
                               "sealed_at = clock_timestamp(), retry_at = NULL, "
                               " cancel_requested_at = coalesce(cancel_requested_at, now()), modified_at = now() "
                               "WHERE id = $1"),
                      crawl_id, reason);
}

void pause(pqxx::work& tx, const std::string& crawl_id)
{
    // Never due while paused (every claim reads the status, whatever retry_at says);
    // the lease (if any) stays with its holder, which drains and releases.
    tx.exec_prepared0(
        prepared(tx, "pause", "UPDATE crawl SET status = 'paused', paused_at = now(), modified_at = now() WHERE id = $1"),
        crawl_id);
}

void resume(pqxx::work& tx, const std::string& crawl_id)
{
    // Due at once, or when its holder (still draining) releases it. The pause does
    // not count against the crawl's timeout.
    tx.exec_prepared0(
        prepared(tx, "resume",
                 "UPDATE crawl SET status = CASE WHEN started_at IS NULL THEN 'queued' ELSE 'started' END, "
                 " paused_s = paused_s + greatest(coalesce(extract(epoch FROM now() - paused_at), 0), 0), "
                 "paused_at = NULL, retry_at = now(), modified_at = now() WHERE id = $1"),
        crawl_id);
}

void requeue_snapshots(pqxx::work& tx, const std::string& snapshot_ids)
{
    tx.exec_prepared0(prepared(tx, "requeue_snapshots",
                               "UPDATE snapshot SET status = 'queued', outcome = NULL, error = NULL, sealed_at = NULL, "
                               "sealed_by = NULL, retry_at = now(), "
                               " attempts = 0, lease_owner = NULL, lease_expires_at = NULL, modified_at = now() "
                               "WHERE id = ANY ($1::uuid[])"),
                      snapshot_ids);
}

std::string requeue_crawl(pqxx::work& tx, const std::string& crawl_id)
{
    // A sealed crawl is queued again as a fresh one (a fresh attempt budget, no stale
    // cancel request, and its clock restarted: the timeout counts from started_at less
    // paused_s, so the old run's start would seal the new run timed_out at once);
    // an unsealed one without a worker becomes due now, its clock running on; a
    // paused one stays paused.
    return tx
        .exec_prepared1(prepared(tx, "requeue_crawl",
                                 "UPDATE crawl SET status = CASE WHEN status = 'sealed' THEN 'queued' ELSE status END, "
                                 " attempts = CASE WHEN status = 'sealed' THEN 0 ELSE attempts END, "
                                 " started_at = CASE WHEN status = 'sealed' THEN NULL ELSE started_at END, "
                                 " paused_s = CASE WHEN status = 'sealed' THEN 0 ELSE paused_s END, "
                                 " paused_at = CASE WHEN status = 'sealed' THEN NULL ELSE paused_at END, "
                                 " outcome = NULL, seal_reason = NULL, sealed_at = NULL, sealed_by = NULL, "
                                 "cancel_requested_at = NULL, "
                                 " retry_at = CASE WHEN status = 'paused' THEN retry_at ELSE now() END, "
                                 "modified_at = now() WHERE id = $1 RETURNING status"),
                        crawl_id)[0]
        .as<std::string>();
}

} // namespace orch::work_states
