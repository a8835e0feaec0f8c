// claim_due_snapshots (common/work/snapshot_claims.hpp), the crawl worker's batched
// claim, against a real PostgreSQL: exclusivity under concurrency, the rows it must
// not take, attempts, the owner rows, and adoption by the worker (Lease::adopt).

#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/work/host_rules.hpp"
#include "common/work/lease.hpp"
#include "common/base/random_id.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/work/work_states.hpp"
#include "crawl_worker/crawl_store.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/reply_dropping_proxy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

using namespace orch;
using namespace orch::test;

namespace {

constexpr std::chrono::seconds k_ttl{30};

struct ClaimFixture {
    ScratchDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
    std::string crawl_owner = random_uuid();
    std::string crawl_id;

    // A started crawl leased to `crawl_owner`, with `n` due snapshots (depth 0).
    explicit ClaimFixture(int n)
    {
        pqxx::work tx(*conn);
        crawl_id = tx.exec_params1("INSERT INTO crawl (urls, status, started_at, lease_owner, lease_expires_at) "
                                   "VALUES ('{http://a.test/}', 'started', now(), $1, now() + interval '1 hour') "
                                   "RETURNING id",
                                   crawl_owner)[0]
                       .as<std::string>();
        tx.exec_params0("INSERT INTO snapshot (crawl_id, url, retry_at) "
                        "SELECT $1, 'http://a.test/' || g, now() - interval '1 second' FROM generate_series(1, $2) g",
                        crawl_id, n);
        tx.commit();
    }

    std::string scalar(const std::string& sql)
    {
        pqxx::nontransaction tx(*conn);
        auto r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    }
    void exec(const std::string& sql) { pqxx::nontransaction(*conn).exec0(sql); }
    std::string quote(const std::string& v) { return conn->quote(v); }
    std::string snapshot(int n) { return scalar("SELECT id FROM snapshot WHERE url = 'http://a.test/" + std::to_string(n) + "'"); }
    // A continuing worker's first claim (free leases only) for `self`.
    ClaimedSnapshot first_claim(const std::string& self)
    {
        ClaimScope free_only;
        free_only.take_expired = false;
        auto claims = claim_due_snapshots(*conn, crawl_id, crawl_owner, {self}, k_ttl, free_only);
        REQUIRE(claims.size() == 1);
        return claims.front();
    }

    static std::vector<std::string> owners(std::size_t n)
    {
        std::vector<std::string> out;
        for (std::size_t i = 0; i < n; ++i) {
            out.push_back(random_uuid());
        }
        return out;
    }
};

// A connection through a ReplyDroppingProxy, whose losses are waited for as in a
// worker (an outage grace of 10 s, reset on destruction).
struct Proxied {
    ReplyDroppingProxy proxy;
    pqxx::connection conn;

    explicit Proxied(const std::string& url) : proxy(url), conn(proxy.url())
    {
        OutagePolicy policy;
        policy.grace = std::chrono::seconds(10);
        set_outage_policy(policy);
    }
    ~Proxied() { set_outage_policy({}); }
    Proxied(const Proxied&) = delete;
    Proxied& operator=(const Proxied&) = delete;
};

} // namespace

TEST_CASE("batched claim: leases up to N due snapshots to the given owners - started and one attempt each",
          "[snapshot_claims]")
{
    ClaimFixture f(5);
    auto owners = ClaimFixture::owners(3);
    auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, owners, k_ttl);
    REQUIRE(claims.size() == 3);
    std::set<std::string> ids;
    for (std::size_t i = 0; i < claims.size(); ++i) {
        CHECK(claims[i].owner == owners[i]);
        CHECK(claims[i].attempts == 1);
        ids.insert(claims[i].snapshot_id);
        CHECK(f.scalar("SELECT status || '/' || attempts || '/' || lease_owner || '/' || (lease_expires_at > now()) "
                       "|| '/' || (started_at IS NOT NULL) FROM snapshot WHERE id = " +
                       f.quote(claims[i].snapshot_id)) == "started/1/" + owners[i] + "/true/true");
    }
    CHECK(ids.size() == 3);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NULL AND status = 'queued' AND attempts = 0") ==
          "2");
    // The rest, then nothing: leased rows are not claimed again.
    CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(5), k_ttl).size() == 2);
    CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(5), k_ttl).empty());
}

TEST_CASE("batched claim: the owner is a pre-created process row - the worker adopts without a second attempt",
          "[snapshot_claims]")
{
    ClaimFixture f(1);
    f.exec("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m1', 'h', 'b', 1)");
    auto row = f.scalar("INSERT INTO process (machine_id, process_type, worker_type, status) "
                        "VALUES ('m1', 'worker', 'snapshot', 'queued') RETURNING id");
    auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, {row}, k_ttl);
    REQUIRE(claims.size() == 1);
    CHECK(f.scalar("SELECT p.status FROM snapshot s JOIN process p ON p.id = s.lease_owner WHERE s.id = " +
                   f.quote(claims[0].snapshot_id)) == "queued");
    // The existing owner row now names its snapshot; the claim returns what a worker needs of it.
    CHECK(f.scalar("SELECT snapshot_id FROM process WHERE id = " + f.quote(row)) == claims[0].snapshot_id);
    CHECK(claims[0].url == "http://a.test/1");
    CHECK(claims[0].depth == 0);
    // Someone else's claim is refused; the owner's adoption keeps the attempt count.
    CHECK_FALSE(Lease::claim(*f.conn, LeaseTable::snapshot, claims[0].snapshot_id, random_uuid(), k_ttl));
    CHECK_FALSE(Lease::adopt(*f.conn, LeaseTable::snapshot, claims[0].snapshot_id, random_uuid(), k_ttl));
    auto lease = Lease::adopt(*f.conn, LeaseTable::snapshot, claims[0].snapshot_id, row, k_ttl);
    REQUIRE(lease);
    CHECK(lease->attempts() == 1);
    CHECK(f.scalar("SELECT attempts || '/' || lease_owner FROM snapshot WHERE id = " + f.quote(claims[0].snapshot_id)) ==
          "1/" + row);
    CHECK(lease->release(*f.conn));
    // Run by hand later: nothing to adopt, a plain claim counts the next attempt.
    CHECK_FALSE(Lease::adopt(*f.conn, LeaseTable::snapshot, claims[0].snapshot_id, row, k_ttl));
    auto again = Lease::claim(*f.conn, LeaseTable::snapshot, claims[0].snapshot_id, row, k_ttl);
    REQUIRE(again);
    CHECK(again->attempts() == 2);
}

TEST_CASE("batched claim: sealed - leased - not yet due - live owners' snapshots are not claimed - expired leases are",
          "[snapshot_claims]")
{
    ClaimFixture f(6);
    auto live = random_uuid();
    auto hung = random_uuid(); // a worker whose lease expired but which its supervisor knows runs
    f.exec("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), retry_at = NULL "
           "WHERE url = 'http://a.test/1'");
    f.exec("UPDATE snapshot SET status = 'started', lease_owner = " + f.quote(live) +
           ", lease_expires_at = now() + interval '1 hour' WHERE url = 'http://a.test/2'");
    f.exec("UPDATE snapshot SET retry_at = now() + interval '1 hour' WHERE url = 'http://a.test/3'");
    f.exec("UPDATE snapshot SET status = 'started', attempts = 1, lease_owner = gen_random_uuid(), "
           "lease_expires_at = now() - interval '1 second' WHERE url = 'http://a.test/4'");
    f.exec("UPDATE snapshot SET status = 'started', attempts = 1, lease_owner = " + f.quote(hung) +
           ", lease_expires_at = now() - interval '1 second' WHERE url = 'http://a.test/5'");
    SECTION("the crawl worker takes expired leases, except its live workers'")
    {
        ClaimScope scope;
        scope.live_owners = {hung, random_uuid()};
        auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(10), k_ttl, scope);
        REQUIRE(claims.size() == 2);
        std::set<std::string> got{claims[0].snapshot_id, claims[1].snapshot_id};
        CHECK(got == std::set<std::string>{f.snapshot(4), f.snapshot(6)});
        for (const auto& c : claims) {
            CHECK(c.attempts == (c.snapshot_id == f.snapshot(4) ? 2 : 1));
        }
        CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE url = 'http://a.test/5'") == hung);
    }
    SECTION("a snapshot worker claiming for itself takes free snapshots only")
    {
        ClaimScope free_only;
        free_only.take_expired = false;
        auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(10), k_ttl, free_only);
        REQUIRE(claims.size() == 1);
        CHECK(claims[0].snapshot_id == f.snapshot(6));
        CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_expires_at < now()") == "2");
    }
    CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE url = 'http://a.test/2'") == live);
}

TEST_CASE("batched claim: nothing is claimed for a paused or cancelled crawl - or without its crawl lease",
          "[snapshot_claims]")
{
    ClaimFixture f(3);
    SECTION("paused")
    {
        f.exec("UPDATE crawl SET status = 'paused'");
    }
    SECTION("cancel requested")
    {
        f.exec("UPDATE crawl SET cancel_requested_at = now()");
    }
    SECTION("crawl lease lost to another worker")
    {
        f.exec("UPDATE crawl SET lease_owner = gen_random_uuid()");
    }
    CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(3), k_ttl).empty());
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NULL AND attempts = 0") == "3");
}

TEST_CASE("batched claim: concurrent claimers never get the same snapshot", "[snapshot_claims]")
{
    constexpr int k_rows = 400;
    constexpr int k_claimers = 4;
    ClaimFixture f(k_rows);
    std::vector<std::vector<ClaimedSnapshot>> got(k_claimers);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int c = 0; c < k_claimers; ++c) {
        threads.emplace_back([&, c] {
            auto conn = f.db.connect();
            while (!go) {
                std::this_thread::yield();
            }
            // Batches of mixed sizes, until nothing is left.
            for (std::size_t n = 1;; n = n % 7 + 1) {
                auto claims = claim_due_snapshots(*conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(n), k_ttl);
                if (claims.empty()) {
                    pqxx::nontransaction tx(*conn);
                    if (tx.exec1("SELECT count(*) FROM snapshot WHERE lease_owner IS NULL")[0].as<int>() == 0) {
                        break;
                    }
                }
                auto& mine = got[static_cast<std::size_t>(c)];
                mine.insert(mine.end(), claims.begin(), claims.end());
            }
        });
    }
    go = true;
    for (auto& t : threads) {
        t.join();
    }
    std::set<std::string> ids;
    std::size_t total = 0;
    for (const auto& claims : got) {
        total += claims.size();
        for (const auto& c : claims) {
            ids.insert(c.snapshot_id);
            CHECK(c.attempts == 1);
        }
    }
    CHECK(total == static_cast<std::size_t>(k_rows));
    CHECK(ids.size() == static_cast<std::size_t>(k_rows));
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE attempts = 1 AND status = 'started'") == std::to_string(k_rows));
    // Each snapshot's lease_owner is the owner its claimer was told about.
    std::size_t matching = 0;
    for (const auto& claims : got) {
        for (const auto& c : claims) {
            matching += f.scalar("SELECT lease_owner FROM snapshot WHERE id = " + f.quote(c.snapshot_id)) == c.owner;
        }
    }
    CHECK(matching == static_cast<std::size_t>(k_rows));
}

TEST_CASE("batched claim: an unstarted claim is given back with its attempt", "[snapshot_claims]")
{
    ClaimFixture f(1);
    auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(1), k_ttl);
    REQUIRE(claims.size() == 1);
    CHECK(work_states::return_unstarted_claim(*f.conn, claims[0].snapshot_id, claims[0].owner));
    CHECK(f.scalar("SELECT attempts || '/' || coalesce(lease_owner::text, '-') FROM snapshot") == "0/-");
    CHECK_FALSE(work_states::return_unstarted_claim(*f.conn, claims[0].snapshot_id, claims[0].owner));
}

TEST_CASE("seal and claim next: one statement seals the held snapshot and leases the next due one to the same "
          "worker - nothing is claimed when the seal fails",
          "[snapshot_claims]")
{
    ClaimFixture f(2);
    const auto self = random_uuid();
    ClaimScope free_only;
    free_only.take_expired = false;
    const std::vector<ClaimedSnapshot> first{f.first_claim(self)};

    // A worker that lost its lease seals nothing and claims nothing.
    SnapshotStore stranger(*f.conn, first[0].snapshot_id, f.crawl_id);
    stranger.set_owner(random_uuid());
    CHECK_THROWS_AS(stranger.seal_and_claim_next(f.crawl_owner, k_ttl), LeaseLost);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == "1");

    SnapshotStore store(*f.conn, first[0].snapshot_id, f.crawl_id);
    store.set_owner(self);
    auto step = store.seal_and_claim_next(f.crawl_owner, k_ttl);
    CHECK(step.outcome == "succeeded");
    CHECK(f.scalar("SELECT status || '/' || coalesce(lease_owner::text, '-') FROM snapshot WHERE id = " +
                   f.quote(first[0].snapshot_id)) == "sealed/-");
    REQUIRE(step.next);
    CHECK(step.next->snapshot_id != first[0].snapshot_id);
    CHECK(step.next->owner == self);
    CHECK(step.next->attempts == 1);
    CHECK(step.next->url.rfind("http://a.test/", 0) == 0);
    CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE id = " + f.quote(step.next->snapshot_id)) == self);

    // The last one: sealed, and nothing left to claim.
    SnapshotStore last(*f.conn, step.next->snapshot_id, f.crawl_id);
    last.set_owner(self);
    auto end = last.seal_and_claim_next(f.crawl_owner, k_ttl);
    CHECK(end.outcome == "succeeded");
    CHECK_FALSE(end.next);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE status = 'sealed'") == "2");

    // Without the crawl's lease nothing is claimed, though the seal happens.
    f.exec("INSERT INTO snapshot (crawl_id, url, retry_at) VALUES (" + f.quote(f.crawl_id) +
           ", 'http://a.test/3', now() - interval '1 second'), (" + f.quote(f.crawl_id) +
           ", 'http://a.test/4', now() - interval '1 second')");
    auto third = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, {self}, k_ttl, free_only);
    REQUIRE(third.size() == 1);
    f.exec("UPDATE crawl SET lease_owner = gen_random_uuid()");
    SnapshotStore fenced(*f.conn, third[0].snapshot_id, f.crawl_id);
    fenced.set_owner(self);
    auto after = fenced.seal_and_claim_next(f.crawl_owner, k_ttl);
    CHECK(after.outcome == "succeeded");
    CHECK_FALSE(after.next);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == "0");
}

TEST_CASE("seal and claim next makes the next snapshot's results: new ones queued - a retried snapshot keeps what it "
          "had",
          "[snapshot_claims]")
{
    ClaimFixture f(2);
    const auto self = random_uuid();
    const std::vector<ClaimedSnapshot> first{f.first_claim(self)};
    const auto second = f.scalar("SELECT id FROM snapshot WHERE id <> " + f.quote(first[0].snapshot_id));
    // The second one ran before: one of its hooks succeeded then.
    f.exec("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status) VALUES (" + f.quote(second) +
           ", 'p', 'p/on_Snapshot__20_b.sh', 'succeeded')");
    std::vector<Hook> hooks(2);
    hooks[0].plugin = "p";
    hooks[0].file_name = "on_Snapshot__10_a.sh";
    hooks[1].plugin = "p";
    hooks[1].file_name = "on_Snapshot__20_b.sh";

    SnapshotStore store(*f.conn, first[0].snapshot_id, f.crawl_id);
    store.set_owner(self);
    auto step = store.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks);
    REQUIRE(step.next);
    CHECK(step.next->snapshot_id == second);
    REQUIRE(step.next_results.size() == 2);
    const auto& fresh = step.next_results.at("p/on_Snapshot__10_a.sh");
    const auto& kept = step.next_results.at("p/on_Snapshot__20_b.sh");
    CHECK(fresh.status == "queued");
    CHECK(kept.status == "succeeded");
    CHECK(f.scalar("SELECT snapshot_id || '/' || status FROM archive_result WHERE id = " + f.quote(fresh.id)) ==
          second + "/queued");
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE snapshot_id = " + f.quote(second)) == "2");
    // What ensure_results would have said for the same snapshot.
    SnapshotStore next(*f.conn, second, f.crawl_id);
    next.set_owner(self);
    const auto ensured = next.ensure_results(hooks);
    CHECK(ensured.at("p/on_Snapshot__10_a.sh").id == fresh.id);
    CHECK(ensured.at("p/on_Snapshot__20_b.sh").id == kept.id);

    // Nothing claimed: no results made, and none returned.
    auto end = next.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks);
    CHECK_FALSE(end.next);
    CHECK(end.next_results.empty());
    CHECK(f.scalar("SELECT count(*) FROM archive_result") == "2");
}


TEST_CASE("seal and claim next points the worker's row at its next snapshot by key - not through the index of live "
          "rows",
          "[snapshot_claims]")
{
    ClaimFixture f(12);
    const auto self = random_uuid();
    f.exec("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m', 'h', 'b', 1)");
    f.exec("INSERT INTO process (id, machine_id, process_type, worker_type, status, pid, started_at) VALUES (" +
           f.quote(self) + ", 'm', 'worker', 'snapshot', 'running', 4242, now())");
    // A history (the planner then prices a key lookup at a three-level B-tree).
    f.exec("INSERT INTO process (machine_id, process_type, status, ended_at) SELECT 'm', 'hook', 'exited', now() "
           "FROM generate_series(1, 100000)");
    // The statistics of a quiet moment: one live row. Then a busy crawl's churn: hook
    // rows that were live and have exited since, each leaving an entry in
    // process_live_idx until the next vacuum.
    f.exec("VACUUM ANALYZE process");
    f.exec("INSERT INTO process (machine_id, process_type, status) SELECT 'm', 'hook', 'queued' "
           "FROM generate_series(1, 3000)");
    f.exec("UPDATE process SET status = 'exited', ended_at = now() WHERE process_type = 'hook'");
    auto held = f.first_claim(self);
    const auto before = index_scans(*f.conn, "process_live_idx");
    // Past the statement's first five (custom) plans: its cached generic plan is used.
    for (int i = 0; i < 10; ++i) {
        SnapshotStore store(*f.conn, held.snapshot_id, f.crawl_id);
        store.set_owner(self);
        auto step = store.seal_and_claim_next(f.crawl_owner, k_ttl);
        REQUIRE(step.next);
        CHECK(f.scalar("SELECT snapshot_id FROM process WHERE id = " + f.quote(self)) == step.next->snapshot_id);
        held = *step.next;
    }
    CHECK(index_scans(*f.conn, "process_live_idx") == before);
}

namespace {

// The held exits of three hook rows of `snapshot`, inserted queued under `parent`
// as a worker reserves them; exit codes 0, 1, 2.
std::vector<process_table::HeldExit> three_hook_exits(ClaimFixture& f, const std::string& parent,
                                                      const std::string& snapshot, std::vector<std::string>& rows)
{
    std::vector<process_table::HeldExit> exits;
    const auto now = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) {
        const auto id = random_uuid();
        f.exec("INSERT INTO process (id, machine_id, parent_id, process_type, status, snapshot_id) VALUES (" +
               f.quote(id) + ", 'm', " + f.quote(parent) + ", 'hook', 'queued', " + f.quote(snapshot) + ")");
        process_table::HeldExit exit;
        exit.id = id;
        exit.identity = ProcessIdentity{5000 + i, "boot", 100, std::nullopt, std::nullopt};
        exit.pgid = 5000 + i;
        exit.spawned = now;
        exit.ended = now;
        exit.end = {i, std::nullopt, "exited", std::nullopt, std::nullopt};
        exit.cgroup_path = "/leaf/" + std::to_string(i);
        exits.push_back(exit);
        rows.push_back(id);
    }
    return exits;
}

} // namespace

TEST_CASE("seal and claim next writes its hooks' exits and points the worker's row by key - even with a plan "
          "cached while the process table was young",
          "[snapshot_claims]")
{
    ClaimFixture f(30);
    const auto self = random_uuid();
    f.exec("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m', 'h', 'b', 1)");
    f.exec("INSERT INTO process (id, machine_id, process_type, worker_type, status, pid, started_at) VALUES (" +
           f.quote(self) + ", 'm', 'worker', 'snapshot', 'running', 4242, now())");
    auto held = f.first_claim(self);
    std::vector<std::string> rows;
    auto step_once = [&] {
        auto exits = three_hook_exits(f, self, held.snapshot_id, rows);
        SnapshotStore store(*f.conn, held.snapshot_id, f.crawl_id);
        store.set_owner(self);
        auto step = store.seal_and_claim_next(f.crawl_owner, k_ttl, exits);
        REQUIRE(step.next);
        CHECK(f.scalar("SELECT snapshot_id FROM process WHERE id = " + f.quote(self)) == step.next->snapshot_id);
        held = *step.next;
    };
    // Past the statement's first five (custom) plans, on a table of a few rows
    // that was never analysed: its generic plan is cached on the connection.
    for (int i = 0; i < 8; ++i) {
        step_once();
    }
    // The table grows to thousands of rows, still without statistics.
    f.exec("INSERT INTO process (machine_id, process_type, status, ended_at) SELECT 'm', 'hook', 'exited', now() "
           "FROM generate_series(1, 5000)");
    const auto scans = seq_scans(*f.conn, "process");
    for (int i = 0; i < 5; ++i) {
        step_once();
    }
    // A join with a JSON set of exits, or with `claimed`, hashed a scan of the whole table here.
    CHECK(seq_scans(*f.conn, "process") == scans);
    // The last one sealed alone, with more exits than are written by key.
    auto exits = three_hook_exits(f, self, held.snapshot_id, rows);
    auto more = three_hook_exits(f, self, held.snapshot_id, rows);
    exits.insert(exits.end(), more.begin(), more.end());
    SnapshotStore last(*f.conn, held.snapshot_id, f.crawl_id);
    last.set_owner(self);
    CHECK(last.seal(exits) == "succeeded");
    CHECK(rows.size() == 15 * 3);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO("row " << i);
        CHECK(f.scalar("SELECT status || '/' || exit_code || '/' || pid || '/' || cgroup_path FROM process WHERE id = " +
                       f.quote(rows[i])) == "exited/" + std::to_string(i % 3) + "/" + std::to_string(5000 + i % 3) +
                                                "//leaf/" + std::to_string(i % 3));
    }
}

TEST_CASE("host-limited claim: at most max_per_host of one host leased at once - under concurrent claimers",
          "[snapshot_claims]")
{
    ClaimFixture f(0);
    f.exec("UPDATE crawl SET max_per_host = 2 WHERE id = " + f.quote(f.crawl_id));
    // 20 of a.test first, then 3 of B.test (its host in another case and with a port) and 1 of c.test.
    f.exec("INSERT INTO snapshot (crawl_id, url, retry_at, created_at) "
           "SELECT " + f.quote(f.crawl_id) + ", u, now() - interval '1 second', now() - interval '1 minute' + g * interval '1 ms' "
           "FROM (SELECT g, CASE WHEN g <= 20 THEN 'http://a.test/' || g WHEN g <= 23 THEN 'http://B.test:8080/' || g "
           "ELSE 'http://c.test/' || g END AS u FROM generate_series(1, 24) g) x");
    ClaimScope limited;
    limited.host_limited = true;
    // The crawl's host claims made `seconds` older: a delay passing without the wait.
    auto age_host_claims = [&](int seconds) {
        f.exec("UPDATE crawl_host_claim SET last_claimed_at = last_claimed_at - make_interval(secs => " +
               std::to_string(seconds) + ") WHERE crawl_id = " + f.quote(f.crawl_id));
    };
    auto leased_per_host = [&] {
        return f.scalar("SELECT string_agg(h || '=' || n, ' ' ORDER BY h) FROM (SELECT url_host(url) h, count(*) n "
                        "FROM snapshot WHERE lease_owner IS NOT NULL AND status = 'started' GROUP BY 1) x");
    };

    SECTION("one claimer: the next due snapshot of each host under its limit")
    {
        auto claims = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited);
        CHECK(claims.size() == 5);
        CHECK(leased_per_host() == "a.test=2 b.test=2 c.test=1");
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).empty());
        // A seal frees its host's slot, for that host only.
        f.exec("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), lease_owner = NULL, "
               "lease_expires_at = NULL WHERE id = " + f.quote(claims.front().snapshot_id));
        auto next = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited);
        REQUIRE(next.size() == 1);
        CHECK(next.front().url.rfind("http://a.test/", 0) == 0);
        // A lease expired under a worker that is gone: taken over, and not counted
        // as running its host meanwhile (else the host stays at its limit for good).
        f.exec("UPDATE snapshot SET lease_expires_at = now() - interval '1 second' WHERE id = " +
               f.quote(next.front().snapshot_id));
        auto taken_over =
            claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited);
        REQUIRE(taken_over.size() == 1);
        CHECK(taken_over.front().snapshot_id == next.front().snapshot_id);
        CHECK(leased_per_host() == "a.test=2 b.test=2 c.test=1");
        // The unlimited statement, for comparison, takes every due row.
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(30), k_ttl).size() == 18);
    }
    SECTION("host_delay_s: a host's next snapshot only once the delay since its last claim passed")
    {
        // An hour's delay: no machine is slow enough to see it pass by itself.
        // The claims are made older instead, by less than the delay, then by more.
        f.exec("UPDATE crawl SET max_per_host = NULL, host_delay_s = 3600 WHERE id = " + f.quote(f.crawl_id));
        auto first = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited);
        CHECK(first.size() == 3);
        CHECK(leased_per_host() == "a.test=1 b.test=1 c.test=1");
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).empty());
        CHECK(f.scalar("SELECT count(*) FROM crawl_host_claim WHERE crawl_id = " + f.quote(f.crawl_id)) == "3");
        age_host_claims(3590);
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).empty());
        age_host_claims(11);
        // c.test has nothing left; a.test and b.test one more each.
        auto second = claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited);
        CHECK(second.size() == 2);
        CHECK(leased_per_host() == "a.test=2 b.test=2 c.test=1");
        // The crawl's seal drops its claim times (migration 0017), and only its own.
        f.exec("INSERT INTO crawl (urls) VALUES (ARRAY['http://other.test/'])");
        f.exec("INSERT INTO crawl_host_claim (crawl_id, host, last_claimed_at) "
               "SELECT id, 'other.test', now() FROM crawl WHERE id <> " + f.quote(f.crawl_id));
        f.exec("UPDATE crawl SET status = 'started', modified_at = now() WHERE id = " + f.quote(f.crawl_id));
        CHECK(f.scalar("SELECT count(*) FROM crawl_host_claim WHERE crawl_id = " + f.quote(f.crawl_id)) == "3");
        f.exec("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), lease_owner = NULL, "
               "lease_expires_at = NULL WHERE crawl_id = " + f.quote(f.crawl_id));
        f.exec("UPDATE crawl SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), lease_owner = NULL, "
               "lease_expires_at = NULL WHERE id = " + f.quote(f.crawl_id));
        CHECK(f.scalar("SELECT count(*) FROM crawl_host_claim WHERE crawl_id = " + f.quote(f.crawl_id)) == "0");
        CHECK(f.scalar("SELECT count(*) FROM crawl_host_claim") == "1");
    }
    SECTION("the machine's default rules (session settings) for a crawl without its own - its own win")
    {
        f.exec("UPDATE crawl SET max_per_host = NULL WHERE id = " + f.quote(f.crawl_id));
        apply_host_rules(*f.conn, HostRules{1, 3'600'000});
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).size() ==
              3);
        CHECK(leased_per_host() == "a.test=1 b.test=1 c.test=1");
        // The crawl's own max_per_host (3) wins over the machine's 1; the machine's
        // delay (an hour) still applies to it: one more of each host once it passed.
        f.exec("UPDATE crawl SET max_per_host = 3 WHERE id = " + f.quote(f.crawl_id));
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).empty());
        age_host_claims(3590);
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).empty());
        age_host_claims(11);
        CHECK(claim_due_snapshots(*f.conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(8), k_ttl, limited).size() ==
              2);
        CHECK(leased_per_host() == "a.test=2 b.test=2 c.test=1");
    }
    SECTION("eight concurrent claimers never lease a third snapshot of a host")
    {
        constexpr int k_claimers = 8;
        std::atomic<bool> go{false};
        std::atomic<int> claimed{0};
        std::vector<std::thread> threads;
        for (int c = 0; c < k_claimers; ++c) {
            threads.emplace_back([&, c] {
                auto conn = f.db.connect();
                while (!go) {
                    std::this_thread::yield();
                }
                for (std::size_t n = static_cast<std::size_t>(c) % 3 + 1, tries = 0; tries < 20; ++tries) {
                    claimed += static_cast<int>(
                        claim_due_snapshots(*conn, f.crawl_id, f.crawl_owner, ClaimFixture::owners(n), k_ttl, limited)
                            .size());
                }
            });
        }
        go = true;
        for (auto& t : threads) {
            t.join();
        }
        CHECK(claimed == 5);
        CHECK(leased_per_host() == "a.test=2 b.test=2 c.test=1");
    }
}

// A seal clears the lease it is fenced on, in one autocommit statement. When the
// connection breaks between that commit and its reply, ride_out runs the same
// statement again on a new connection (common/db/database_outage.hpp): these run it
// twice, as that retry does, and then as a worker that never held the lease.
TEST_CASE("a seal run again after it committed is recognised as ours by sealed_by - not as a lost lease", "[snapshot_claims]")
{
    ClaimFixture f(3);
    const auto self = random_uuid();
    const auto first = f.first_claim(self);
    SnapshotStore store(*f.conn, first.snapshot_id, f.crawl_id);
    store.set_owner(self);
    CHECK(store.seal() == "succeeded");
    CHECK(f.scalar("SELECT sealed_by FROM snapshot WHERE id = " + f.quote(first.snapshot_id)) == self);
    CHECK(store.seal() == "succeeded");
    SnapshotStore stranger(*f.conn, first.snapshot_id, f.crawl_id);
    stranger.set_owner(random_uuid());
    CHECK_THROWS_AS(stranger.seal(), LeaseLost);

    std::vector<Hook> hooks(1);
    hooks[0].plugin = "p";
    hooks[0].file_name = "on_Snapshot__10_a.sh";
    const auto second = f.first_claim(self);
    SnapshotStore continuing(*f.conn, second.snapshot_id, f.crawl_id);
    continuing.set_owner(self);
    const auto step = continuing.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks);
    REQUIRE(step.next);
    const auto again = continuing.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks);
    CHECK(again.outcome == step.outcome);
    // What the first run claimed, read back: nothing claimed twice, no attempt counted twice.
    REQUIRE(again.next);
    CHECK(again.next->snapshot_id == step.next->snapshot_id);
    CHECK(again.next->owner == self);
    CHECK(again.next->attempts == 1);
    CHECK(again.next->url == step.next->url);
    REQUIRE(again.next_results.size() == 1);
    CHECK(again.next_results.at("p/on_Snapshot__10_a.sh").id == step.next_results.at("p/on_Snapshot__10_a.sh").id);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == "1");
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND sealed_by = " + f.quote(self)) == "2");

    SnapshotStore other(*f.conn, second.snapshot_id, f.crawl_id);
    other.set_owner(random_uuid());
    CHECK_THROWS_AS(other.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks), LeaseLost);

    // The crawl worker giving up on the snapshot its dead worker held (one attempt allowed), twice.
    CrawlStore crawl(*f.conn, f.crawl_id);
    crawl.set_owner(f.crawl_owner);
    CHECK(crawl.retry_or_fail(step.next->snapshot_id, self, 1, 1, std::chrono::seconds(0), "died"));
    CHECK(crawl.retry_or_fail(step.next->snapshot_id, self, 1, 1, std::chrono::seconds(0), "died"));
    CHECK(f.scalar("SELECT outcome || '/' || sealed_by FROM snapshot WHERE id = " + f.quote(step.next->snapshot_id)) ==
          "failed/" + f.crawl_owner);
    CHECK(f.scalar("SELECT count(*) FROM event WHERE kind = 'snapshot.gave_up'") == "1");

    // The crawl's own seal, the same way.
    const auto outcome = crawl.seal(std::nullopt, std::nullopt);
    CHECK(f.scalar("SELECT sealed_by FROM crawl") == f.crawl_owner);
    CHECK(crawl.seal(std::nullopt, std::nullopt) == outcome);
    CHECK(f.scalar("SELECT count(*) FROM event WHERE kind = 'crawl.sealed'") == "1");
    CrawlStore usurper(*f.conn, f.crawl_id);
    usurper.set_owner(random_uuid());
    CHECK_THROWS_AS(usurper.seal(std::nullopt, std::nullopt), LeaseLost);
}

TEST_CASE("a seal whose reply is lost with the connection after it committed - the retry on a new connection finds "
          "it sealed by us and goes on",
          "[snapshot_claims]")
{
    ClaimFixture f(2);
    Proxied proxied(f.db.url());
    auto& proxy = proxied.proxy;
    auto& through = proxied.conn;
    std::vector<Hook> hooks(1);
    hooks[0].plugin = "p";
    hooks[0].file_name = "on_Snapshot__10_a.sh";
    const auto self = random_uuid();
    const auto first = f.first_claim(self);

    SnapshotStore store(through, first.snapshot_id, f.crawl_id);
    store.set_owner(self);
    proxy.arm_statement("snapshot_store.seal_and_claim_next");
    const auto step = store.seal_and_claim_next(f.crawl_owner, k_ttl, {}, hooks);
    CHECK(proxy.dropped() == 1);
    CHECK(step.outcome == "succeeded");
    REQUIRE(step.next);
    CHECK(step.next->attempts == 1);
    CHECK(step.next_results.count("p/on_Snapshot__10_a.sh") == 1);
    CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE id = " + f.quote(step.next->snapshot_id)) == self);

    SnapshotStore last(through, step.next->snapshot_id, f.crawl_id);
    last.set_owner(self);
    proxy.arm_statement("snapshot_store.seal.");
    CHECK(last.seal() == "succeeded");
    CHECK(proxy.dropped() == 2);

    CrawlStore crawl(through, f.crawl_id);
    crawl.set_owner(f.crawl_owner);
    proxy.arm_statement("crawl_store.seal");
    CHECK(crawl.seal(std::nullopt, std::nullopt) == "succeeded");
    CHECK(proxy.dropped() == 3);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND sealed_by = " + f.quote(self)) == "2");
    CHECK(f.scalar("SELECT status || '/' || sealed_by FROM crawl") == "sealed/" + f.crawl_owner);
}

TEST_CASE("a claim whose reply is lost with the connection after it committed is found again by its owners - not "
          "claimed a second time",
          "[snapshot_claims]")
{
    ClaimFixture f(10);
    f.exec("UPDATE crawl SET max_per_host = 10");
    Proxied proxied(f.db.url());
    auto& proxy = proxied.proxy;
    auto& through = proxied.conn;
    const auto check = [&](const std::vector<ClaimedSnapshot>& claims, const std::vector<std::string>& owners) {
        REQUIRE(claims.size() == owners.size());
        for (std::size_t i = 0; i < owners.size(); ++i) {
            CHECK(claims[i].owner == owners[i]);
            CHECK(claims[i].attempts == 1);
            CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE id = " + f.quote(claims[i].snapshot_id)) == owners[i]);
        }
    };

    // Batched: one statement in autocommit, its reply lost.
    const auto owners = ClaimFixture::owners(3);
    proxy.arm_statement("snapshot_claims.claim_due");
    check(claim_due_snapshots(through, f.crawl_id, f.crawl_owner, owners, k_ttl), owners);
    CHECK(proxy.dropped() == 1);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == "3");

    // Host-limited: a transaction per claim, the reply to its COMMIT lost.
    ClaimScope hosts;
    hosts.host_limited = true;
    const auto more = ClaimFixture::owners(2);
    proxy.arm_statement_commit("snapshot_claims.claim_due.hosts");
    check(claim_due_snapshots(through, f.crawl_id, f.crawl_owner, more, k_ttl, hosts), more);
    CHECK(proxy.dropped() == 2);
    CHECK(f.scalar("SELECT count(*) FROM snapshot WHERE lease_owner IS NOT NULL") == "5");
}
