#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <string>
#include <vector>

namespace orch {

// A crawl leased to a crawl_worker process row that does not exist yet: the
// orchestrator spawns the worker with that row id, and the worker's own claim
// finds the lease already its own.
struct ClaimedCrawl {
    std::string crawl_id;
    std::string worker_row_id;
};

// Claims up to `limit` due crawls in one statement (FOR UPDATE SKIP LOCKED, due
// time then creation order), each for a fresh worker row id, with lease `ttl`.
// Concurrent orchestrators never get the same crawl. An expired lease is taken
// over unless `live_owners` (the caller's crawl workers that still run) holds
// it: after a database outage longer than the lease, the holder renews it once
// it is back, and a worker that stalls is ended by recovery, which frees its lease.
std::vector<ClaimedCrawl> claim_due_crawls(pqxx::connection& conn, std::size_t limit, std::chrono::seconds ttl,
                                           const std::vector<std::string>& live_owners = {});

// Whether the crawl is paused (an operator's pause, or a crawl worker that found
// the crawl's own configuration refused).
bool crawl_paused(pqxx::connection& conn, const std::string& crawl_id);

// Gives a crawl back if `owner` still holds it; due again after `backoff`.
void release_crawl(pqxx::connection& conn, const std::string& crawl_id, const std::string& owner,
                   std::chrono::seconds backoff);

struct LeaseRecovery {
    int crawls = 0;
    int snapshots = 0;
};

// Frees the leases of crawls and snapshots whose owner row says exited: a crashed
// worker's work is resumed at once instead of after its lease expires. Archive
// results it left started go back to queued.
LeaseRecovery release_dead_leases(pqxx::connection& conn);

// Process rows on this machine that still run but whose lease expired (stopped or
// hung workers): the caller must end them before their work runs elsewhere.
std::vector<std::string> stalled_lease_owners(pqxx::connection& conn, const std::string& machine_id);

struct UnfinishedCrawl {
    std::string crawl_id;
    std::string retry_at; // when it is due again, ISO 8601 UTC
};

// Of `crawl_ids`, those still queued or started (not sealed, not paused).
std::vector<UnfinishedCrawl> unfinished_crawls(pqxx::connection& conn, const std::vector<std::string>& crawl_ids);

// True when a crawl is due now or within `window`, or a schedule is.
bool work_due_within(pqxx::connection& conn, std::chrono::seconds window);

} // namespace orch
