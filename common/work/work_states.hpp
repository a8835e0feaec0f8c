#pragma once

#include "common/db/event_journal.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

// The crawl and snapshot state machine: every statement that changes a crawl's
// or a snapshot's status, lease (lease_owner, lease_expires_at) or attempts is
// here, and nowhere else (tests/house/check_state_writes.py keeps it so).
// Callers keep their own statements for the other tables and for reads, and
// join them to these in one transaction or one statement where they must.
//
// The states (migrations/0001, 0013): a crawl is queued, started, paused or
// sealed; a snapshot queued, started or sealed. Sealed is final but for an
// operator's retry. A lease names the process row that holds the item until it
// expires; its holder writes the item only in statements fenced on still
// holding it (lease.hpp). An attempt is counted by every claim, and taken back
// when a claimed item's worker never ran anything.
//
// Conventions of every operation below, unless its contract says otherwise:
// - One taking a `pqxx::connection&` runs in a transaction (or autocommit
//   statement) of its own and commits; it rides out a database outage
//   (database_outage.hpp) and blocks for its round trips.
// - One taking a `pqxx::work&` runs inside the caller's transaction, which the
//   caller commits: it is one statement of that transaction (one round trip),
//   so that the caller can join its own writes (journal, results) to it.
// - Ids and owners are uuid text; owners are process row ids.
// - Nothing is thrown but what libpqxx throws (pqxx::sql_error,
//   pqxx::broken_connection past an outage's grace). An operation that finds
//   nothing to change returns false, nullopt or 0: that is an expected outcome.
namespace orch {

// Which queue table a lease is on. Both have lease_owner / lease_expires_at.
enum class LeaseTable { crawl, snapshot };

namespace work_states {

// ---------------------------------------------------------------------------
// One item's lease (crawl or snapshot): the operations of class Lease.

// A read, for a seal that matched nothing (its lease gone): the item's outcome
// when it is sealed by `owner` (this very seal, committed on an earlier try
// whose reply was lost with the connection), else nullopt. Autocommit; rides
// out an outage.
std::optional<std::string> sealed_outcome_by(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                             const std::string& owner);

// Claims `item_id` for `owner` if it is queued or started and its lease is
// free, expired, or already `owner`'s: the lease runs `ttl` from now, a queued
// item becomes started (started_at set once), one attempt is counted. Returns
// the attempts after this claim; nullopt when another live lease holds it, or
// the item is sealed or paused (or does not exist).
std::optional<int> claim(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                         const std::string& owner, std::chrono::seconds ttl);
// Takes up a lease granted to `owner` by a batched claim on its behalf: moves
// its expiry to `ttl` from now, counting no attempt. Returns the item's
// attempts; nullopt when `owner` does not hold it or it is sealed or paused.
// Autocommit without waiting for the WAL flush (only the expiry moves).
std::optional<int> adopt(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                         const std::string& owner, std::chrono::seconds ttl);
// Moves the expiry of `owner`'s lease on `item_id` to `ttl` from now. False
// when `owner` no longer holds it (expired and taken, or cleared).
bool renew(pqxx::connection& conn, LeaseTable table, const std::string& item_id, const std::string& owner,
           std::chrono::seconds ttl);
// Moves the expiry of every unsealed snapshot of `crawl_id` leased to `owner`
// to `ttl` from now (a snapshot worker's batch). Returns the ids renewed,
// possibly none.
std::vector<std::string> renew_snapshots_of(pqxx::connection& conn, const std::string& crawl_id,
                                            const std::string& owner, std::chrono::seconds ttl);
// Frees `owner`'s lease on `item_id`; the item is due `retry_after` from now.
// Status and attempts are kept. False when `owner` no longer held it.
bool release(pqxx::connection& conn, LeaseTable table, const std::string& item_id, const std::string& owner,
             std::chrono::seconds retry_after);

// ---------------------------------------------------------------------------
// Crawls: the orchestrator's queue and recovery.

// One crawl leased by claim_due_crawls, to a worker row that may not exist yet.
struct CrawlClaim {
    std::string crawl_id;
    std::string owner;
};
// Leases up to owners.size() due crawls (queued or started, retry_at passed,
// lease free, or expired and not held by one of `live_owners`), due time then
// creation order, skipping rows a concurrent claimer locked: each to a distinct
// id of `owners` (fresh ids of the caller), for `ttl`. Status and attempts are
// not changed: the crawl worker's own claim() counts the attempt. One
// autocommit statement without waiting for the WAL flush (the worker claims
// again durably before it runs anything). When the connection breaks after
// the statement committed, the crawls found leased to `owners` are returned
// instead of claiming again. Returns the claims, possibly none.
std::vector<CrawlClaim> claim_due_crawls(pqxx::connection& conn, const std::vector<std::string>& owners,
                                         std::chrono::seconds ttl, const std::vector<std::string>& live_owners);
// After a crawl worker `owner` exited: frees its lease on `crawl_id` (or finds
// it freed already) and makes the crawl due `backoff` from now, never sooner
// than it already was. Sealed crawls are left alone.
void release_crawl_of_exited(pqxx::connection& conn, const std::string& crawl_id, const std::string& owner,
                             std::chrono::seconds backoff);
// Recovery: frees every unsealed snapshot's (crawl's) lease whose owner row
// says exited, due now. Returns how many. Run the snapshot one after the
// caller's own writes that find the snapshots by their dead lease.
int free_exited_leases(pqxx::work& tx, LeaseTable table);

// ---------------------------------------------------------------------------
// Crawls: the crawl worker, before and after its claim (CrawlStore).

// Before the crawl is claimed, for a crawl whose configuration the workers
// refuse: pauses it (paused_at now) and frees its lease, if it is queued or
// started and its lease is free, expired, or held for us: by the row
// `lease_holder` (our --process-id) or by a live row with `cookie`. Returns
// whether it was paused.
bool pause_refused_crawl(pqxx::work& tx, const std::string& crawl_id, const std::optional<std::string>& lease_holder,
                         const std::optional<std::string>& cookie);
// Before the crawl is claimed, for a crawl we will not run: frees the lease if
// it is held for us (as above). Nothing else changes.
void release_unstarted_crawl(pqxx::work& tx, const std::string& crawl_id,
                             const std::optional<std::string>& lease_holder, const std::optional<std::string>& cookie);
// The crawl's seal as a journalled change (event_journal.hpp), prepared as
// `name`: seals crawl $1 if $2 holds its lease, with outcome $3 when not NULL,
// else succeeded when every snapshot succeeded (or there are none), failed when
// none succeeded or was partial, partial otherwise; seal_reason $4, sealed_by
// $2; the lease is freed and the crawl is due never. Its change returns
// (outcome, ok, partial, total); the journal entry's message and detail say
// them; the statement returns the outcome, no row when $2 no longer holds the
// lease. `leading_ctes` ("name AS (...), ") are the caller's, placed first, and
// may use the parameters from k_crawl_seal_parameters + 1 on.
inline constexpr std::size_t k_crawl_seal_parameters = 4;
ChangeStatement crawl_seal(const std::string& name, const std::string& leading_ctes);

// ---------------------------------------------------------------------------
// Snapshots: the crawl worker's handling of its snapshot workers.

// A claim whose worker never started, given back by `owner`: frees the lease,
// due now, one attempt taken back. False if `owner` no longer held it or the
// snapshot is sealed.
bool return_unstarted_claim(pqxx::connection& conn, const std::string& snapshot_id, const std::string& owner);
// As return_unstarted_claim, for a worker `worker` that ended before it ran
// anything, inside the crawl holder's transaction; also records `reason` as
// the snapshot's error. Only a snapshot of `crawl_id` still leased to `worker`.
void give_back_snapshot(pqxx::work& tx, const std::string& snapshot_id, const std::string& crawl_id,
                        const std::string& worker, const std::string& reason);
// After its worker died, a snapshot out of attempts: sealed failed with
// `error`, sealed_by `sealed_by`, its lease freed, due never. The caller has
// locked the row and checked whose lease it was.
void seal_snapshot_failed(pqxx::work& tx, const std::string& snapshot_id, const std::string& error,
                          const std::string& sealed_by);
// After its worker died, a snapshot with attempts left: its lease freed,
// `error` recorded, due `backoff` from now. Status and attempts are kept.
void retry_snapshot_later(pqxx::work& tx, const std::string& snapshot_id, const std::string& error,
                          std::chrono::seconds backoff);
// Seals every unsealed snapshot of `crawl_id` with `outcome` and `error`,
// sealed_by `sealed_by`, leases freed. Returns how many.
int seal_unsealed_snapshots(pqxx::work& tx, const std::string& crawl_id, const std::string& outcome,
                            const std::string& error, const std::string& sealed_by);

// ---------------------------------------------------------------------------
// Operators' commands (orchestrator/command_*.cpp), each in the command's own
// transaction, on a crawl row it locked FOR UPDATE. Prepared on tx's
// connection as "work_states.<operation>".

// Asks the crawl's worker to cancel it (cancel_requested_at, kept if set).
void request_cancel(pqxx::work& tx, const std::string& crawl_id);
// Seals every unsealed snapshot of `crawl_id` cancelled with `error`, leases
// freed. Returns how many.
long seal_cancelled_snapshots(pqxx::work& tx, const std::string& crawl_id, const std::string& error);
// Seals the crawl cancelled with seal_reason `reason` (cancel request noted),
// whatever its state: the caller checked that nobody works on it.
void seal_cancelled_crawl(pqxx::work& tx, const std::string& crawl_id, const std::string& reason);
// Pauses the crawl (paused_at now); its lease, if any, stays with its holder.
void pause(pqxx::work& tx, const std::string& crawl_id);
// Resumes a paused crawl: started if it ever started, else queued; the pause
// is added to paused_s; due now.
void resume(pqxx::work& tx, const std::string& crawl_id);
// Queues again the snapshots of `snapshot_ids` (a uuid array literal): no
// outcome, error or seal, a fresh attempt budget, leases freed, due now.
void requeue_snapshots(pqxx::work& tx, const std::string& snapshot_ids);
// Queues the crawl again: a sealed one as a fresh crawl (status queued, no
// attempts, clock and pauses reset), an unsealed one due now, a paused one
// stays paused; no outcome or cancel request either way. Returns the crawl's
// status after it; throws pqxx::unexpected_rows when there is no such crawl.
std::string requeue_crawl(pqxx::work& tx, const std::string& crawl_id);

// ---------------------------------------------------------------------------
// Snapshots: claims and seals as parts of bigger statements
// (snapshot_claims.hpp, the snapshot worker's SnapshotStore). Nothing here
// runs a statement; parameters are referenced by the caller's numbers.

// The batched snapshot claim, as one statement: see claim_due_snapshots for
// what it claims, and snapshot_claims.hpp for its parameters $1-$6
// (claim_parameters()). `leading_ctes` ("name AS (...), ") come first and may
// use $7 and up; `gate` ("AND ...") is one more condition on every picked row;
// `select` is the statement's final query over the CTE `claimed` (id,
// lease_owner, attempts, n, url, depth), and may start with more CTEs of its
// own (", name AS (...) SELECT ..."); `limit` is how many rows to pick,
// cardinality($3::uuid[]) for one per owner. A literal limit lets the server
// keep the statement's generic plan. `self` ("$8"), when the one owner is the
// claiming process itself: its row is then pointed at the claimed snapshot by
// that key (an index probe whatever the statistics), not by a join with
// `claimed`. `host_limited`: also skips snapshots whose host is at its crawl's
// max_per_host or within its host_delay_s, and stamps the host's claim
// (ClaimScope::host_limited; run it through exec_claim). `fresh_after_first`:
// of the rows picked, only the first may have been attempted before; the
// others are claimed only if never attempted. With `self`, its row is pointed
// at the first snapshot claimed.
std::string claim_statement(const std::string& leading_ctes, const std::string& gate, const std::string& select,
                            const std::string& limit, const std::string& self = "", bool host_limited = false,
                            bool fresh_after_first = false);

// One snapshot's seal inside a statement: the caller's CTEs `before` (ending in
// ", ") define `counts<suffix>` (failed, total: the snapshot's results, as the
// caller counts them); the seal is then the CTE `sealed<suffix>`, which seals
// snapshot `snapshot` if `owner` holds its lease (and `condition`, " AND ...",
// holds): succeeded when no result failed, failed when all did, else partial
// with the count as error; sealed_by `owner`, lease freed, due never; it
// returns the outcome, no row when the lease is gone. `after` (", name AS
// (...)") follows and may read sealed<suffix> (writes fenced on the seal).
// The statement commits without waiting for the WAL flush (the crawl's seal
// is the durable point, snapshot_store.cpp).
struct SnapshotSeal {
    std::string snapshot;  // parameter reference, "$7"
    std::string before;
    std::string condition;
    std::string after;
    std::string suffix;    // "" gives sealed, counts<""> ...
};
// The CTEs of `seal` held by `owner` ("$8"): before, sealed<suffix>, after.
std::string seal_snapshot_ctes(const SnapshotSeal& seal, const std::string& owner);

// Seal and claim in one statement (a continuing snapshot worker's step):
// `leading_ctes` first, then every seal of `seals`, all held by `owner`; then
// claim_statement() for the one owner `owner` (self), picking only once every
// seal sealed (each seal's sealed<suffix> has a row), `limit` rows, with
// `host_limited` and `fresh_after_first` as there; `select` as there, and it
// may read each sealed<suffix>. One round trip; run it through exec_claim.
struct SealAndClaim {
    std::string leading_ctes;
    std::vector<SnapshotSeal> seals;
    std::string owner;
    std::string select;
    std::string limit = "1";
    bool host_limited = false;
    bool fresh_after_first = false;
};
std::string seal_and_claim_statement(const SealAndClaim& statement);

} // namespace work_states
} // namespace orch
