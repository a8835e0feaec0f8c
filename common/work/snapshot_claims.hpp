#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace orch {

// One snapshot leased by claim_due_snapshots, and the process row that now holds it.
struct ClaimedSnapshot {
    std::string snapshot_id;
    std::string owner; // the process row id it was claimed for (lease_owner)
    int attempts = 0;  // after this claim
    std::string url;
    int depth = 0;
};

// Which leased snapshots a claim may take over.
struct ClaimScope {
    // Expired leases are taken over, except those held by these process rows (workers
    // known to be still running: their own supervisor decides what becomes of them).
    bool take_expired = true;
    std::vector<std::string> live_owners;
    // The crawl has per-host rules (crawl.max_per_host, crawl.host_delay_s,
    // migrations/0016): a snapshot is claimed only while fewer than max_per_host
    // of its host's run, counting every started and leased snapshot of the crawl
    // but those of the claiming owners themselves (a worker sealing its snapshot
    // in the statement that claims its next), and once host_delay_s passed since
    // its host's last claim. Such claims are serialized per crawl and made one
    // snapshot per statement (see claim_due_snapshots).
    bool host_limited = false;
};

// Batched claim of the due snapshots of one crawl, on behalf of workers that may
// not run yet. In one statement, for the holder of the crawl's lease
// (`crawl_owner`; fencing: nothing is claimed once that lease is lost), claims up
// to owners.size() snapshots of `crawl_id` that are unsealed, due (retry_at passed),
// whose lease is free (or expired, as `scope` allows), shallowest and oldest
// first, skipping rows locked by a concurrent claimer (FOR UPDATE SKIP LOCKED: two
// claimers never get the same row). Nothing is claimed while the crawl is paused,
// sealed or has a cancellation requested. Each claimed snapshot is leased to a
// distinct id of `owners` (process row ids; the rows may be created later with
// these ids, see LaunchRequest::row_id) for `ttl`, moves from queued to started and
// counts an attempt, exactly as Lease::claim does; an owner's process row that
// already exists gets the snapshot as its snapshot_id (dashboards show what a
// worker is on). A worker spawned for it adopts
// it with Lease::adopt, which does not count a second attempt; a worker claiming
// for itself takes it up with Lease::granted.
//
// One statement in autocommit that does not wait for the WAL flush: a claim lost
// in a database crash takes with it nothing durable (every later write of its
// holder is fenced on the lease, and the holder's connection is gone too), and the
// snapshot is simply due again. Blocks for one round trip, and through a
// database outage: a claim whose reply was lost with the connection after it
// committed is found again by its owners, not repeated. Throws what libpqxx
// throws. Returns the claims made (possibly none), in claim order.
//
// A host-limited crawl (scope.host_limited) is claimed one snapshot per
// statement, each in a transaction that first takes the crawl's claim lock
// (exec_claim): the count of a host's running snapshots a statement reads is then
// never older than the last claim of that crawl. One transaction per claimed
// snapshot, only for such crawls.
std::vector<ClaimedSnapshot> claim_due_snapshots(pqxx::connection& conn, const std::string& crawl_id,
                                                 const std::string& crawl_owner,
                                                 const std::vector<std::string>& owners, std::chrono::seconds ttl,
                                                 const ClaimScope& scope = {});

// (The claim statement itself, for a caller that joins its own work to it in
// one statement, is work_states::claim_statement, work_states.hpp; its
// parameters $1-$6 are claim_parameters().)

// Runs a claim statement prepared as `name`: in autocommit, or, for a
// host-limited crawl, in a transaction that first waits for the crawl's claim
// lock (an advisory transaction lock on its id, taken by no other code), so
// that the statement's snapshot is taken after the previous claim committed.
// Rides out a database outage (ride_out); `claimed_before`, when given, runs
// before every try after the first (the connection broke under the previous
// one, which may have committed before its reply was lost): what it returns,
// if anything, is returned instead of claiming again. Throws what libpqxx throws.
pqxx::result exec_claim(pqxx::connection& conn, const std::string& name, const std::string& definition,
                        const std::vector<std::optional<std::string>>& params, const std::string& crawl_id,
                        bool host_limited,
                        const std::function<std::optional<pqxx::result>()>& claimed_before = {});
// The parameters $1-$6 of a claim statement (work_states::claim_statement).
std::vector<std::string> claim_parameters(const std::string& crawl_id, const std::string& crawl_owner,
                                          const std::vector<std::string>& owners, std::chrono::seconds ttl,
                                          const ClaimScope& scope);
// The claim in columns first .. first + 5 of a row in the shape of `claimed`.
ClaimedSnapshot claimed_snapshot(const pqxx::row& row, pqxx::row::size_type first);

} // namespace orch
