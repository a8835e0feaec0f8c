#pragma once

#include "common/work/snapshot_claims.hpp"
#include "common/recorder/supervisor.hpp"
#include "common/base/write_behind.hpp"
#include "snapshot_worker/snapshot_store.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// What a continuing snapshot worker holds between snapshots when it takes them
// in batches (SNAPSHOT_WORKER_BATCH). The statements a snapshot costs the
// database are mostly fixed overhead (each data-modifying CTE opens its table's
// indexes and compiles its checks, each statement has its bind, commit and
// executor start): a worker whose snapshots end within the write-behind window
// claims several at once, reserves the rows of all their hooks in one
// statement, holds each finished one's seal back, and seals them all in the
// statement that claims the next batch (SnapshotStore::seal_batch_and_claim).
// Its seals are held no longer than results are (k_write_behind_window, the
// running snapshot's loop writes them when due), so a slow snapshot behind a
// quick one delays nothing; a snapshot that was not quick takes the next one
// alone. A crash loses what a crash of the write-behind loses: the held seals
// (their snapshots run again) and the claims not started (due again once the
// crawl worker sees the death). Not thread-safe; every call that writes blocks
// for its round trips and throws what libpqxx throws.
namespace orch {

class SnapshotBatch {
public:
    using Clock = std::chrono::steady_clock;

    // A snapshot claimed and not started yet: its claim, its results, and the
    // launch requests whose rows are reserved, by hook id (empty: reserved by
    // its run).
    struct Claimed {
        ClaimedSnapshot claim;
        std::map<std::string, ResultState> results;
        std::map<std::string, LaunchRequest> reserved;
    };
    // The launch requests of a claimed snapshot's hooks, to reserve.
    using Requests = std::function<std::vector<LaunchRequest>(const Claimed&)>;

    SnapshotBatch(pqxx::connection& conn, Supervisor& supervisor);

    // Snapshots a statement claimed, in claim order, to run after any claimed
    // before. With more than one, the rows of all their hooks are reserved in
    // one statement (`requests` gives each one's).
    void take(std::vector<std::pair<ClaimedSnapshot, std::map<std::string, ResultState>>> claims,
              const Requests& requests);
    bool has_ahead() const noexcept { return !m_ahead.empty(); }
    // The next claimed snapshot to run; has_ahead() must be true.
    Claimed pop();

    // A snapshot that ran to its end at `finished`, whose seal waits for the
    // next statement (at most k_write_behind_window).
    void hold(std::unique_ptr<SnapshotStore> store, Clock::time_point finished = Clock::now());
    // The held snapshots' stores, for seal_batch_and_claim.
    std::vector<SnapshotStore*> held() const;
    // Forgets the held snapshots: a batch statement sealed them.
    void held_sealed() noexcept { m_held.clear(); }
    // When the oldest held seal falls due; nullopt when none is held.
    std::optional<Clock::time_point> seal_due() const;
    // Seals every held snapshot now, one statement each, the first carrying
    // the supervisor's held exits (none are taken when nothing is held). A held
    // snapshot whose lease is gone is logged and skipped, never thrown for: it
    // is called from the running snapshot's loop, which a sibling's loss must
    // not end.
    void seal_held();
    // Gives back every claimed snapshot not started (its attempt taken back,
    // due at once) and closes its reserved rows (not_started).
    void release_ahead();

private:
    pqxx::connection& m_conn;
    Supervisor& m_supervisor;
    std::deque<Claimed> m_ahead;
    struct Held {
        std::unique_ptr<SnapshotStore> store;
        Clock::time_point finished;
    };
    std::vector<Held> m_held;
};

} // namespace orch
