// Row 3 of scripts/bench: claim + complete of snapshot rows, queue only (no
// processes), 8 clients, each draining its own crawl as a crawl_worker does.
//   ours, single:  what a snapshot worker that takes snapshot after snapshot runs
//             per snapshot: SnapshotStore::seal_and_claim_next, one statement that
//             seals it and claims the next for itself (k = 1, free leases only,
//             fenced on the crawl lease);
//   ours, batched: the spawn path: the crawl worker's batched claim (k owners per
//             statement) + SnapshotStore::seal per item under the lease taken as
//             granted (Lease::granted, no round trip: what each freshly started
//             snapshot worker does for its first snapshot, told by --lease-claimed-at);
//   baseline: a pgbench-style raw claim, UPDATE ... FROM (SELECT ... ORDER BY the
//             same keys FOR UPDATE SKIP LOCKED LIMIT k) RETURNING, and a raw complete
//             (UPDATE ... = ANY), on the same indexes, each one statement in
//             autocommit; as context for batched, the same raw claim with a
//             complete statement per item (fenced on its lease), as each of our
//             snapshot workers seals its own.
// Both commit without waiting for the WAL flush, as our claims and seals do (the
// crawl's seal is the durable point: snapshot_worker/snapshot_store.cpp), so the
// ratio compares the statements, not two durability choices.
// Single-item (k = 1) and batched (k = 50), on a queue of 1k and of `large` due rows.
// First, context rows: this machine's PostgreSQL against the reference machine's
// figures (the machine the absolute goals were set on).
// Needs TEST_DATABASE_URL. Usage: bench_claims [large-queue-rows] [items] [calibration seconds]
#include "common/work/lease.hpp"
#include "common/base/random_id.hpp"
#include "common/work/snapshot_claims.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "tests/bench/bench_machine.hpp"
#include "tests/bench/bench_report.hpp"
#include "tests/support/pg_fixture.hpp"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

using namespace orch;
using namespace orch::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int k_clients = 8;
constexpr int k_batch = 50;
constexpr int k_repeats = 3;

// The (fixed) process row id of the crawl worker that holds client c's crawl.
std::string crawl_owner(int c)
{
    return "00000000-0000-4000-8000-00000000000" + std::to_string(c);
}

// One crawl per client with `per_crawl` due snapshots each; returns the crawl ids.
std::vector<std::string> fill(pqxx::connection& conn, long per_crawl)
{
    pqxx::work tx(conn);
    tx.exec0("TRUNCATE crawl CASCADE");
    std::vector<std::string> crawls;
    for (int c = 0; c < k_clients; ++c) {
        // Leased, as by the crawl worker draining it (the batched claim is fenced on it).
        auto id = tx.exec_params1("INSERT INTO crawl (urls, status, started_at, lease_owner, lease_expires_at) "
                                  "VALUES ('{https://example.com/}', 'started', now(), $1, now() + interval '1 day') "
                                  "RETURNING id",
                                  crawl_owner(c))[0]
                      .as<std::string>();
        tx.exec_params0("INSERT INTO snapshot (crawl_id, url) "
                        "SELECT $1, 'https://example.com/' || g FROM generate_series(1, $2) g",
                        id, per_crawl);
        crawls.push_back(id);
    }
    tx.commit();
    pqxx::nontransaction(conn).exec0("VACUUM ANALYZE snapshot");
    return crawls;
}

// Makes every snapshot due again (untimed, between rounds on the small queue).
void reset(pqxx::connection& conn)
{
    pqxx::work tx(conn);
    tx.exec0("UPDATE snapshot SET status = 'queued', outcome = NULL, error = NULL, sealed_at = NULL, "
             " retry_at = now() - interval '1 second', lease_owner = NULL, lease_expires_at = NULL, attempts = 0");
    tx.commit();
    pqxx::nontransaction(conn).exec0("VACUUM ANALYZE snapshot");
}

// One client's work: claims and completes up to `quota` items (0 = until nothing is due).
using Client = std::function<long(pqxx::connection&, const std::string& crawl, long quota)>;

long ours_spawned(pqxx::connection& conn, const std::string& crawl, long quota, std::size_t batch)
{
    const std::string crawl_worker =
        pqxx::nontransaction(conn).exec_params1("SELECT lease_owner FROM crawl WHERE id = $1", crawl)[0].as<std::string>();
    const auto ttl = std::chrono::seconds(30);
    long done = 0;
    while (quota == 0 || done < quota) {
        // The crawl worker: one worker row id per free slot, one batched claim.
        std::vector<std::string> owners;
        for (std::size_t i = 0; i < batch; ++i) {
            owners.push_back(random_uuid());
        }
        const auto claimed_at = Lease::Clock::now();
        auto claims = claim_due_snapshots(conn, crawl, crawl_worker, owners, ttl);
        if (claims.empty()) {
            break;
        }
        // Each snapshot worker: take up the lease granted to its row, run, seal.
        for (const auto& claim : claims) {
            const auto lease =
                Lease::granted(LeaseTable::snapshot, claim.snapshot_id, claim.owner, ttl, claim.attempts, claimed_at);
            SnapshotStore store(conn, lease.item_id());
            store.set_owner(claim.owner);
            store.seal();
            ++done;
        }
    }
    return done;
}

// A continuing snapshot worker: its first claim, then per snapshot one statement
// that seals it and claims the next (the last one is sealed alone).
long ours_continuing(pqxx::connection& conn, const std::string& crawl, long quota)
{
    const std::string crawl_worker =
        pqxx::nontransaction(conn).exec_params1("SELECT lease_owner FROM crawl WHERE id = $1", crawl)[0].as<std::string>();
    const auto ttl = std::chrono::seconds(30);
    const auto self = random_uuid();
    ClaimScope free_only;
    free_only.take_expired = false;
    auto first = claim_due_snapshots(conn, crawl, crawl_worker, {self}, ttl, free_only);
    std::optional<ClaimedSnapshot> held;
    if (!first.empty()) {
        held = first.front();
    }
    long done = 0;
    while (held) {
        SnapshotStore store(conn, held->snapshot_id, crawl);
        store.set_owner(self);
        ++done;
        if (quota != 0 && done >= quota) {
            store.seal();
            break;
        }
        held = store.seal_and_claim_next(crawl_worker, ttl).next;
    }
    return done;
}

// `per_item`: each claimed item completed by a statement of its own, fenced on
// its lease, as each of our snapshot workers seals its own snapshot: the least
// that any per-item seal costs here.
long raw(pqxx::connection& conn, const std::string& crawl, long quota, long batch, bool per_item = false)
{
    conn.prepare("bench.raw_complete_one",
                 "UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), "
                 " retry_at = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2");
    pqxx::nontransaction session(conn);
    session.exec0("SET synchronous_commit = off");
    long done = 0;
    while (quota == 0 || done < quota) {
        auto r = session.exec_params(
            "UPDATE snapshot s SET lease_owner = gen_random_uuid(), lease_expires_at = now() + interval '30 s', "
            " status = 'started', attempts = attempts + 1 "
            "FROM (SELECT id FROM snapshot WHERE crawl_id = $1 AND status IN ('queued', 'started') "
            "      AND retry_at <= now() AND lease_owner IS NULL "
            "      ORDER BY depth, retry_at, created_at LIMIT $2 FOR UPDATE SKIP LOCKED) due "
            "WHERE s.id = due.id RETURNING s.id, s.lease_owner",
            crawl, batch);
        if (r.empty()) {
            break;
        }
        if (per_item) {
            for (const auto& row : r) {
                session.exec_prepared0("bench.raw_complete_one", row[0].c_str(), row[1].c_str());
            }
            done += static_cast<long>(r.size());
            continue;
        }
        std::string ids = "{";
        for (const auto& row : r) {
            ids += (ids.size() > 1 ? "," : "") + row[0].as<std::string>();
        }
        session.exec_params0("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), "
                              " retry_at = NULL, lease_owner = NULL, lease_expires_at = NULL "
                              "WHERE id = ANY($1::uuid[])",
                              ids + "}");
        done += static_cast<long>(r.size());
    }
    session.exec0("RESET synchronous_commit");
    return done;
}

// Runs `client` on k_clients connections at once; returns the items done.
long run_clients(const std::vector<std::unique_ptr<pqxx::connection>>& conns, const std::vector<std::string>& crawls,
                   long quota_each, const Client& client)
{
    std::atomic<long> total{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < k_clients; ++c) {
        threads.emplace_back([&, c] { total += client(*conns[static_cast<std::size_t>(c)], crawls[static_cast<std::size_t>(c)], quota_each); });
    }
    for (auto& t : threads) {
        t.join();
    }
    return total;
}

// Medians of each kind's rates, and the medians of the repeats' paired ratios
// (ours of a repeat against the raw of the same repeat).
struct Rates {
    double ours_single, raw_single, ours_batched, raw_batched, raw_batched_per_item;
    double single_ratio, batched_ratio, batched_per_item_ratio;
};

// Claims `items` in total from a queue of `queue_rows` due rows, for each kind
// of client; k_repeats times, the kinds interleaved, and the median of each
// kind is its rate, so that a checkpoint or an autovacuum landing on one
// measurement does not decide a row. A queue smaller than `items` is refilled
// between rounds; a larger one is filled once and never reset: a reset would
// update every row (a million on the large queue, each a new entry in every
// index of the table) before each measurement, so later measurements met an
// ever larger index than the first.
Rates measure(pqxx::connection& admin, const std::vector<std::unique_ptr<pqxx::connection>>& conns, long queue_rows,
              long items)
{
    const long per_crawl = queue_rows / k_clients;
    auto crawls = fill(admin, per_crawl);
    // Untimed: the fill's dirty pages are written before the clock runs, not during it.
    pqxx::nontransaction(admin).exec0("CHECKPOINT");
    const std::vector<Client> kinds = {
        [](pqxx::connection& c, const std::string& crawl, long q) { return ours_continuing(c, crawl, q); },
        [](pqxx::connection& c, const std::string& crawl, long q) { return raw(c, crawl, q, 1); },
        [](pqxx::connection& c, const std::string& crawl, long q) { return ours_spawned(c, crawl, q, k_batch); },
        [](pqxx::connection& c, const std::string& crawl, long q) { return raw(c, crawl, q, k_batch); },
        [](pqxx::connection& c, const std::string& crawl, long q) { return raw(c, crawl, q, k_batch, true); }};
    // Refilled when the queue cannot serve every measurement; then a queue smaller
    // than `items` is drained in rounds, a larger one gives `items` per measurement.
    const bool refill = queue_rows < items * static_cast<long>(kinds.size()) * k_repeats;
    const long rounds = refill ? std::max(1L, items / queue_rows) : 1;
    const long quota = queue_rows >= items ? items / k_clients : 0;
    auto rate = [&](const Client& client) {
        double seconds = 0;
        long n = 0;
        for (long r = 0; r < rounds; ++r) {
            if (refill) {
                reset(admin);
            }
            const auto t0 = Clock::now();
            n += run_clients(conns, crawls, quota, client);
            seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        }
        if (n == 0) {
            // A rate of nothing is a broken benchmark, not a slow queue.
            throw std::runtime_error("row 3: a measurement claimed no rows (queue of " + std::to_string(queue_rows) + ")");
        }
        return static_cast<double>(n) / seconds;
    };
    std::vector<std::vector<double>> rates(kinds.size());
    for (int i = 0; i < k_repeats; ++i) {
        for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
            rates[kind].push_back(rate(kinds[kind]));
        }
    }
    auto median = [&](std::size_t kind) { return bench::value_of(bench::median(rates[kind]), "claim rates"); };
    auto paired = [&](std::size_t ours, std::size_t raw) {
        std::vector<double> ratios;
        for (int i = 0; i < k_repeats; ++i) {
            ratios.push_back(rates[ours][static_cast<std::size_t>(i)] / rates[raw][static_cast<std::size_t>(i)]);
        }
        return bench::value_of(bench::median(ratios), "claim ratios");
    };
    Rates out{median(0), median(1), median(2), median(3), median(4), paired(0, 1), paired(2, 3), paired(2, 4)};
    std::printf("claims, %ld due rows, median of %d: ours %.0f/s single, %.0f/s batched; raw %.0f/s single, "
                "%.0f/s batched, %.0f/s batched with a complete per item\n",
                queue_rows, k_repeats, out.ours_single, out.ours_batched, out.raw_single, out.raw_batched,
                out.raw_batched_per_item);
    return out;
}

std::string k(double v)
{
    return bench::fixed(v / 1000.0, 2) + "k/s";
}

// The reference machine's figures for the same two measurements.
constexpr double k_reference_connections_per_s = 345;
constexpr double k_reference_by_id_updates_per_s = 21'587;

// Before the queues exist: the machine measured as the reference machine was.
void calibrate(const ScratchDatabase& db, double seconds)
{
    std::vector<double> connections;
    std::vector<double> updates;
    for (int i = 0; i < k_repeats; ++i) {
        connections.push_back(bench::connections_per_second(db.url(), seconds));
        updates.push_back(bench::by_id_updates_per_second(db.url(), seconds));
    }
    const double conn_rate = bench::value_of(bench::median(connections), "connection rates");
    const double update_rate = bench::value_of(bench::median(updates), "update rates");
    const std::string reference_window = "wall clock, median of " + std::to_string(k_repeats) + " x " +
                                         bench::fixed(seconds) + " s, vs a fixed reference figure";
    std::printf("machine, median of %d x %.1f s, 8 clients: %.0f new connections/s, %.0f by-id updates/s\n", k_repeats,
                seconds, conn_rate, update_rate);
    bench::report_context("3 context: new connections/s here vs the goals' reference machine (8 clients)",
                          bench::fixed(conn_rate, 0), bench::fixed(k_reference_connections_per_s, 0),
                          bench::fixed(conn_rate / k_reference_connections_per_s, 2) + "x", reference_window);
    bench::report_context("3 context: by-id UPDATE ... RETURNING here vs the reference (8 clients, no WAL flush)",
                          k(update_rate), k(k_reference_by_id_updates_per_s),
                          bench::fixed(update_rate / k_reference_by_id_updates_per_s, 2) + "x", reference_window);
}

void run_bench(long large, long items, double calibration_s)
{
    ScratchDatabase db;
    calibrate(db, calibration_s);
    auto admin = db.connect();
    std::vector<std::unique_ptr<pqxx::connection>> conns;
    for (int c = 0; c < k_clients; ++c) {
        conns.push_back(db.connect());
    }
    const auto small_q = measure(*admin, conns, 1000, items);
    const auto large_q = measure(*admin, conns, large, items);
    const std::string big = large >= 1'000'000 ? std::to_string(large / 1'000'000) + "M" : std::to_string(large / 1000) + "k";
    const std::string window = "wall clock per measurement, first claim -> last client done; " +
                               std::to_string(k_repeats) + " interleaved repeats, median of the paired ratios";
    auto row = [&](const std::string& name, double ours, double raw, double ratio, const std::string& goal,
                   double floor) {
        bench::report_row(name, k(ours), k(raw), bench::fixed(ratio, 2), goal, bench::Verdict::of(ours >= floor),
                          window);
    };
    row("3 claim single, 1k due (items/s)", small_q.ours_single, small_q.raw_single, small_q.single_ratio, ">= 4k/s",
        4000);
    row("3 claim batched, 1k due (items/s)", small_q.ours_batched, small_q.raw_batched, small_q.batched_ratio,
        ">= 10k/s", 10000);
    row("3 claim single, " + big + " due (items/s)", large_q.ours_single, large_q.raw_single, large_q.single_ratio,
        ">= 4k/s", 4000);
    row("3 claim batched, " + big + " due (items/s)", large_q.ours_batched, large_q.raw_batched,
        large_q.batched_ratio, ">= 10k/s", 10000);
    // Each of our seals is its own statement (a snapshot worker seals the snapshot
    // it ran): the raw loop that completes each item by a statement of its own is
    // what the batched goal meets on this machine with no overhead of ours.
    for (const auto* q : {&small_q, &large_q}) {
        bench::report_context("3 context: batched vs raw batched claim + one complete statement per item (as each "
                              "worker seals its own), " + std::string(q == &small_q ? "1k" : big) + " due (items/s)",
                              k(q->ours_batched), k(q->raw_batched_per_item), bench::fixed(q->batched_per_item_ratio, 2),
                              window);
    }
    const double flat_single = small_q.ours_single / large_q.ours_single;
    const double flat_batched = small_q.ours_batched / large_q.ours_batched;
    bench::report_row("3 claim flatness 1k/" + big + " (single, batched)", bench::fixed(flat_single, 2) + ", " + bench::fixed(flat_batched, 2),
                      bench::fixed(small_q.raw_single / large_q.raw_single, 2) + ", " +
                          bench::fixed(small_q.raw_batched / large_q.raw_batched, 2),
                      "-", "<= 1.5", bench::Verdict::of(std::max(flat_single, flat_batched) <= 1.5),
                      "median rates as above, the 1k queue measured before the " + big +
                          " one (not paired: the baseline column is raw's own flatness)");
}

} // namespace

int main(int argc, char** argv)
{
    const long large = argc > 1 ? std::atol(argv[1]) : 1'000'000;
    const long items = argc > 2 ? std::atol(argv[2]) : 4000;
    const double calibration_s = argc > 3 ? std::atof(argv[3]) : 4;
    try {
        run_bench(large, items, calibration_s);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_claims: %s\n", e.what());
        return 1;
    }
    return 0;
}
