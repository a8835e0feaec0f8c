#pragma once

#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/hook_result.hpp"
#include "common/hooks/output_files.hpp"
#include "common/recorder/process_table.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/work/url_filter.hpp"
#include "snapshot_worker/result_state.hpp"
#include "snapshot_worker/result_write_behind.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch {

// How many distinct skipped URLs a crawl lists at most (crawl_skipped_url);
// links skipped after that are only counted.
constexpr long k_skipped_listed = 10000;

// One snapshot and the crawl settings that govern it, as read at start.
struct SnapshotRecord {
    std::string id;
    std::string crawl_id;
    std::string url;
    int depth = 0;
    std::string status;            // queued | started | sealed
    int max_depth = 0;             // of the crawl
    std::optional<int> max_urls;   // of the crawl
    bool host_limited = false;     // the crawl has per-host rules (ClaimScope::host_limited)
    nlohmann::json crawl_config = nlohmann::json::object();
    bool crawl_cancelled = false;
    ScopeMode scope = ScopeMode::any;  // of the crawl (migrations/0023)
    std::vector<std::string> seeds;    // the crawl's URLs, which its scope is drawn around
};

// The snapshot's rows, written only while `owner` holds the snapshot's lease:
// every write checks the lease under a row lock in the same statement and throws
// LeaseLost when it no longer holds. Each call that writes commits its own
// transaction.
// Not thread-safe; blocks for its round trips; throws what libpqxx throws.
class SnapshotStore {
public:
    // `crawl_id` may be left empty until load() reads it.
    SnapshotStore(pqxx::connection& conn, std::string snapshot_id, std::string crawl_id = {});

    // Reads the snapshot and its crawl; nullopt if there is no such snapshot.
    std::optional<SnapshotRecord> load();
    void set_owner(std::string owner) { m_owner = std::move(owner); }

    // One queued archive_result per hook (idempotent); returns every result by hook id.
    std::map<std::string, ResultState> ensure_results(const std::vector<Hook>& hooks);
    // A hook's start and its result are held back (ResultWriteBehind) and
    // written by flush_results(), which the caller runs when next_result_flush()
    // is due; requeue() flushes whatever is held first, and seal() and
    // seal_and_claim_next() write it in their own statement. These two do no I/O.
    void mark_started(const std::string& result_id, const std::string& process_id);
    void record(const std::string& result_id, const HookResult& result, const OutputFiles& files);
    // Writes the held writes that are due (all of them with `all`) in one
    // statement; nothing when none are. Throws LeaseLost if the lease is gone.
    void flush_results(bool all = false);
    std::optional<ResultWriteBehind::Clock::time_point> next_result_flush() const { return m_writes.next_due(); }
    // Puts an interrupted hook's result back to queued so a resumed run reruns it.
    void requeue(const std::string& result_id, const std::string& why);
    void set_title(const std::string& title);
    // Inserts child snapshots at `depth` for `urls.accepted` (already validated
    // and filtered), honouring the crawl's max_urls: the room left goes to the
    // first of them, in their order, that the crawl does not have yet; URLs it
    // has are ignored and take no room. In the same statement, lists
    // `urls.skipped` in crawl_skipped_url (the ones it does not list yet, while
    // the crawl has fewer than k_skipped_listed there) and counts the rest in
    // crawl_skipped_count (migrations/0023). Returns how many were added.
    int add_children(const FilteredUrls& urls, int depth, std::optional<int> max_urls);
    // Seals the snapshot with the outcome derived from its results; returns that
    // outcome. Does not wait for the WAL flush: the crawl's seal is the durable
    // point (see snapshot_store.cpp). The same statement writes `exits`, hook
    // exits its supervisor held (Supervisor::take_held_exits), even when the
    // seal finds the lease gone. A seal that committed on an earlier try (the
    // reply lost with the connection: ride_out runs it again) is recognised by
    // the row's sealed_by and returns its outcome; throws LeaseLost when the
    // lease is gone otherwise.
    std::string seal(const std::vector<process_table::HeldExit>& exits = {});
    // What a worker that takes snapshot after snapshot does between two, in one
    // statement: seal() and, only if that sealed, claim_due_snapshots of the
    // crawl's next due snapshot with a free lease for the same owner, fenced on
    // `crawl_owner`'s crawl lease; the next snapshot gets its results for
    // `hooks` in the same statement (what ensure_results() returns for it).
    // `exits` as for seal(). `host_limited`: the crawl has per-host rules
    // (ClaimScope::host_limited; the statement then waits for the crawl's claim
    // lock). Throws LeaseLost when the seal finds the lease gone, except when
    // the statement committed on an earlier try, as for seal(): then returns
    // what it sealed and claimed, read back.
    struct SealAndNext {
        std::string outcome;
        std::optional<ClaimedSnapshot> next;
        std::map<std::string, ResultState> next_results; // by hook id, when `next` is set
    };
    SealAndNext seal_and_claim_next(const std::string& crawl_owner, std::chrono::seconds ttl,
                                    const std::vector<process_table::HeldExit>& exits = {},
                                    const std::vector<Hook>& hooks = {}, bool host_limited = false);

    // A continuing worker's step between two batches (snapshot_batch.hpp), in
    // one statement: seals this snapshot and each of `held` (snapshots it ran
    // and whose seal it held back), writing their held results, and, only if
    // every one of them sealed, claims up to `claim` (at least 1) of the
    // crawl's next due snapshots with a free lease for the same owner, fenced
    // on `crawl_owner`'s crawl lease, the first of any kind, the others only if
    // never attempted (work_states::claim_statement, fresh_after_first), with their results
    // for `hooks`; the owner's row names the first. `exits` as for seal(). Not
    // for a host-limited crawl. Throws LeaseLost when a seal finds its lease
    // gone, except when the statement committed on an earlier try (the reply
    // lost with the connection): then returns what it claimed, read back.
    struct BatchStep {
        std::vector<std::string> outcomes; // this snapshot's, then each of `held`'s
        // In claim order, each with its results by hook id.
        std::vector<std::pair<ClaimedSnapshot, std::map<std::string, ResultState>>> next;
    };
    BatchStep seal_batch_and_claim(const std::vector<SnapshotStore*>& held, const std::string& crawl_owner,
                                   std::chrono::seconds ttl, const std::vector<process_table::HeldExit>& exits,
                                   const std::vector<Hook>& hooks, int claim);
    const std::string& snapshot_id() const { return m_snapshot_id; }
    // The snapshot's directory: each seal above, once its statement has
    // returned, writes the snapshot's index.json there (write_snapshot_index:
    // a failure is logged, never thrown). Unset: no index is written.
    void set_index_dir(std::filesystem::path snap_dir) { m_index_dir = std::move(snap_dir); }

private:
    void write_index();
    void require(const pqxx::result& r, const char* what) const;
    // After a seal statement matched nothing: the outcome if the snapshot was
    // sealed by us (sealed_by), else throws LeaseLost.
    std::string sealed_already();
    // Every held write, taken out, as the seal statements' JSON parameter.
    std::string held_results();
    pqxx::connection& m_conn;
    std::string m_snapshot_id;
    std::string m_crawl_id;
    std::string m_owner;
    std::filesystem::path m_index_dir;
    ResultWriteBehind m_writes;
};

} // namespace orch
