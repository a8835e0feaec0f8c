#pragma once

#include "common/work/work_states.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <optional>
#include <string>

namespace orch {

// An explicit, expiring claim of one crawl or snapshot row by one process row.
// Its statements are work_states' (work_states.hpp: claim, adopt, renew, release).
// Fencing rule: the holder writes the item (and its children) only in statements
// conditioned on still holding the lease; a lease that expired and was taken by
// another process makes those statements match nothing, and the holder stops.
class Lease {
public:
    using Clock = std::chrono::steady_clock;

    // Claims `item_id` for `owner` (a process.id) if it is not sealed and its lease
    // is free, expired, or already ours. Moves a queued item to started and counts
    // an attempt. Returns nullopt when another live lease holds it, or the item is
    // sealed or paused. Commits its own transaction.
    static std::optional<Lease> claim(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                      const std::string& owner, std::chrono::seconds ttl);
    // Takes up a lease already granted to `owner` by a batched claim on its behalf
    // (claim_due_snapshots): renews it without counting another attempt. Returns
    // nullopt when `owner` does not hold it (never claimed for it, expired and taken,
    // or the item was sealed); then use claim(). Commits its own transaction without
    // waiting for the WAL flush (it only moves the expiry; see lease.cpp).
    static std::optional<Lease> adopt(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                      const std::string& owner, std::chrono::seconds ttl);

    // The lease `owner` was granted a moment ago by a claim made on its own behalf
    // (claim_due_snapshots with itself as the owner), or on its behalf by the
    // parent that then started it (`attempts` as that claim returned): no round
    // trip, the claim already set the expiry. `granted_at` is a moment taken
    // before the claim was sent (the parent passes its own; CLOCK_MONOTONIC is
    // shared by the processes of a machine), so renewals come no later than the
    // claim's expiry requires; a time in the future counts as now.
    static Lease granted(LeaseTable table, std::string item_id, std::string owner, std::chrono::seconds ttl,
                         int attempts, Clock::time_point granted_at = Clock::now());

    // From now on renew() also extends every other unsealed snapshot of crawl
    // `crawl_id` leased to the same owner (a snapshot worker holding a batch:
    // the snapshots claimed ahead and those whose seal it holds, which would
    // otherwise expire behind a slow one and make recovery take the worker for
    // stalled). Snapshot leases only.
    void renew_siblings_in(std::string crawl_id) { m_siblings_crawl = std::move(crawl_id); }
    // Extends the lease. False when it was lost (expired and taken, or cleared).
    bool renew(pqxx::connection& conn);
    // True when a third of the TTL has passed since the last renewal, or the
    // last renewal found the lease lost.
    bool renewal_due(Clock::time_point now = Clock::now()) const;
    // When the next renewal is due.
    Clock::time_point next_renewal() const;
    // When the lease's expiry was last set (or a moment before): its grant, or
    // its last renewal. A sibling's lease set by the same renewal starts from it.
    Clock::time_point renewed_at() const { return m_renewed; }
    // Gives the item back so another worker can resume it: due now, or after
    // `retry_after` (a worker giving up after a failure must not have its item
    // claimed again at once, in a hot loop). False if already lost.
    bool release(pqxx::connection& conn, std::chrono::seconds retry_after = std::chrono::seconds(0));

    const std::string& item_id() const { return m_item_id; }
    const std::string& owner() const { return m_owner; }
    LeaseTable table() const { return m_table; }
    int attempts() const { return m_attempts; }
    std::chrono::seconds ttl() const { return m_ttl; }

private:
    Lease(LeaseTable table, std::string item_id, std::string owner, std::chrono::seconds ttl, int attempts);
    // The lease a claim or an adoption returned attempts for; nullopt when it did not.
    static std::optional<Lease> held(LeaseTable table, const std::string& item_id, const std::string& owner,
                                     std::chrono::seconds ttl, std::optional<int> attempts);
    LeaseTable m_table;
    std::string m_item_id;
    std::string m_owner;
    std::chrono::seconds m_ttl;
    int m_attempts;
    bool m_lost = false;
    Clock::time_point m_renewed = Clock::now();
    std::optional<std::string> m_siblings_crawl;
};

// Lease TTL from LEASE_TTL (seconds, 2..3600), default 30 s. Throws ConfigError
// for any other value (env_setting.hpp).
std::chrono::seconds lease_ttl_from_env();

// How long an item waits after its `failures`-th failed run before it is due
// again: 2, 4, 8 ... 300 s. The orchestrator applies it to a crawl worker that
// died, the crawl worker to its own crawl when it gives up after an error.
std::chrono::seconds failure_backoff(int failures);

} // namespace orch
