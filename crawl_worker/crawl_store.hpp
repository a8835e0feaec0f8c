#pragma once

#include "common/recorder/process_table.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace orch {

struct CrawlRecord {
    std::string id;
    std::string first_url; // what Crawl hooks get as --url
    long url_count = 0;
    int max_depth = 0;
    std::optional<int> max_urls;
    bool host_limited = false; // max_per_host or host_delay_s set: ClaimScope::host_limited
    std::optional<double> host_delay_s;
    std::optional<int> timeout_s;
    std::string status;
    nlohmann::json config = nlohmann::json::object();
    bool cancel_requested = false;
    double started_seconds_ago = 0; // since the crawl first started, time paused not counted (0 if never)
};

// Crawl-level reads and writes. Writes are conditioned on holding the crawl's
// lease (owner); a write that matches nothing throws LeaseLost. Each call commits.
class CrawlStore {
public:
    CrawlStore(pqxx::connection& conn, std::string crawl_id);

    std::optional<CrawlRecord> load();
    void set_owner(std::string owner) { m_owner = std::move(owner); }

    // Depth-0 snapshots for the crawl's URLs (idempotent, honours max_urls),
    // made by the server from the crawl row: the URL list never crosses to us.
    int create_seed_snapshots(std::optional<int> max_urls);
    // (Due snapshots are claimed in batches by claim_due_snapshots, common/work/snapshot_claims.hpp.)
    // Unsealed snapshots left (any lease state).
    long unsealed_count();
    // What an operator asked of the crawl since it was loaded.
    struct Control {
        bool cancel_requested = false;
        bool paused = false;
    };
    Control control();
    // Before the crawl is claimed, for a crawl whose own configuration the
    // workers refuse (common/work/crawl_config_check.hpp): pauses it, so that no
    // orchestrator retries it until an operator resumes or cancels it, and
    // journals why, in one transaction. Only a crawl that is queued or started
    // and unleased, leased to the row an orchestrator claimed it for (named by
    // `lease_holder`, our --process-id, or by `cookie`, the one our parent put
    // in our environment), or whose lease expired is paused; its lease is freed.
    // Returns whether it was paused.
    bool pause_refused(const std::optional<std::string>& lease_holder, const std::optional<std::string>& cookie,
                       const std::string& problem);
    // Before the crawl is claimed, for a crawl we will not run (paused meanwhile):
    // frees the lease an orchestrator took for us (named as above), so that a
    // resume makes it claimable at once, not after a recovery pass.
    void release_unstarted(const std::optional<std::string>& lease_holder, const std::optional<std::string>& cookie);

    // The unsealed snapshots whose lease `worker` (a process row) holds, in the
    // order it claimed them: what a snapshot worker that takes one snapshot after
    // another was on when it died (with a batch, snapshot_worker/snapshot_batch.hpp,
    // also those it ran and held the seal of, and those it had not started).
    std::vector<std::string> held_by(const std::string& worker);
    // After a snapshot worker died: frees its lease and makes the snapshot due
    // again after `backoff`, or seals it failed when it had `max_attempts` already.
    // An attempt is the larger of the snapshot's claims and `deaths` (workers of
    // this run that died on it), so workers dying before they claim also count.
    // Returns true if it was sealed (by this call, or by an earlier try of it
    // whose reply was lost with the connection: sealed_by names us).
    // After a snapshot worker ended before it started anything (it refused its
    // configuration, exit 3, or a stop signal killed it while it was starting):
    // frees the lease it was given and takes back the attempt its claim counted,
    // since nothing ran. The snapshot is due again at once.
    void give_back_unspent(const std::string& snapshot_id, const std::string& worker, const std::string& reason);
    bool retry_or_fail(const std::string& snapshot_id, const std::string& dead_worker, int deaths, int max_attempts,
                       std::chrono::seconds backoff, const std::string& reason);
    // Seals every unsealed snapshot with `outcome` (cancelled, timed_out, failed) and
    // fails their unfinished archive results. Returns how many.
    int seal_unsealed(const std::string& outcome, const std::string& reason);
    // Seals the crawl with `forced`, or else with the outcome of its snapshots:
    // succeeded when all succeeded (or it has none), failed when none succeeded
    // or was partial, partial otherwise. The same durable statement writes the held
    // process exits `exits` (Supervisor::take_held_exits: the last snapshot
    // worker's, the crawl's hooks'), whatever becomes of the seal. Returns the
    // outcome; throws LeaseLost when the lease is no longer ours, unless we
    // sealed the crawl ourselves (sealed_by): a seal that committed on an
    // earlier try, whose reply was lost with the connection, returns its outcome.
    std::string seal(const std::optional<std::string>& forced, const std::optional<std::string>& reason,
                     const std::vector<process_table::HeldExit>& exits = {});
    // Prepares the seal's statement for the usual case, one held exit (the last
    // snapshot worker's), so that the seal does not parse it: call it while the
    // snapshot workers run. One round trip; throws what libpqxx throws.
    void prepare_seal();

private:
    // Inside `tx`: locks our crawl row FOR SHARE while we hold its lease; throws
    // LeaseLost naming `what` when we no longer do.
    void require_lease(pqxx::work& tx, const char* what) const;

    pqxx::connection& m_conn;
    std::string m_crawl_id;
    std::string m_owner;
};

} // namespace orch
