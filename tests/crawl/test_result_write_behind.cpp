// The write-behind of a snapshot's archive_result rows (snapshot_worker/
// result_write_behind.hpp) and SnapshotStore's flush of it, against a real
// PostgreSQL: nothing is written before a write is due, a start and an end
// held together become one write, the seal writes what is still held, and a
// worker without the lease writes nothing.

#include "common/base/errors.hpp"
#include "common/base/random_id.hpp"
#include "snapshot_worker/result_write_behind.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using namespace orch::test;
using Clock = ResultWriteBehind::Clock;

namespace {

HookResult result_of(HookStatus status, std::optional<std::string> error = std::nullopt)
{
    HookResult r;
    r.status = status;
    r.output_str = "out";
    r.error = std::move(error);
    return r;
}

std::vector<Hook> two_hooks()
{
    Hook a;
    a.plugin = "p";
    a.file_name = "on_Snapshot__10_a.sh";
    Hook b = a;
    b.file_name = "on_Snapshot__20_b.sh";
    return {a, b};
}

struct StoreFixture {
    ScratchDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
    std::string owner = random_uuid();
    std::string crawl_id;
    std::string snapshot_id;
    std::string process_a = random_uuid();
    std::string process_b = random_uuid();
    std::unique_ptr<SnapshotStore> store;
    std::string result_a; // archive_result of hook a (step 10)
    std::string result_b; // and of hook b (step 20)

    // One snapshot leased to `owner`, two hook process rows, and the store of
    // the owner with the two hooks' results.
    StoreFixture()
    {
        pqxx::work tx(*conn);
        crawl_id = tx.exec1("INSERT INTO crawl (urls) VALUES ('{http://a.test/}') RETURNING id")[0].as<std::string>();
        snapshot_id = tx.exec_params1("INSERT INTO snapshot (crawl_id, url, status, lease_owner, lease_expires_at) "
                                      "VALUES ($1, 'http://a.test/', 'started', $2, now() + interval '1 hour') "
                                      "RETURNING id",
                                      crawl_id, owner)[0]
                          .as<std::string>();
        tx.exec0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('m1', 'h', 'b', 1)");
        for (const auto& id : {process_a, process_b}) {
            tx.exec_params0("INSERT INTO process (id, machine_id, process_type) VALUES ($1, 'm1', 'hook')", id);
        }
        tx.commit();
        store = std::make_unique<SnapshotStore>(*conn, snapshot_id, crawl_id);
        store->set_owner(owner);
        auto results = store->ensure_results(two_hooks());
        result_a = results.at("p/on_Snapshot__10_a.sh").id;
        result_b = results.at("p/on_Snapshot__20_b.sh").id;
    }

    std::string scalar(const std::string& sql)
    {
        pqxx::nontransaction tx(*conn);
        auto r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    }
    std::string row_of(const std::string& result_id)
    {
        return scalar("SELECT concat_ws('/', status, attempts, process_id IS NOT NULL, start_ts IS NOT NULL, "
                      "end_ts IS NOT NULL, coalesce(output_str, '-'), coalesce(error, '-')) "
                      "FROM archive_result WHERE id = " + conn->quote(result_id));
    }
    // A hook's start and end, both held by the store.
    void ran(const std::string& result, const std::string& process, HookStatus status,
             std::optional<std::string> error = std::nullopt)
    {
        store->mark_started(result, process);
        store->record(result, result_of(status, std::move(error)), OutputFiles{});
    }
};

} // namespace

TEST_CASE("result write-behind: a start is due after the delay - an end merges with a start still held",
          "[result_write_behind]")
{
    ResultWriteBehind w;
    CHECK(w.empty());
    CHECK_FALSE(w.next_due());
    const auto t0 = Clock::now();
    w.started("r1", "p1", t0);
    REQUIRE(w.next_due());
    CHECK(*w.next_due() == t0 + ResultWriteBehind::k_delay);
    CHECK(w.take(t0) == "[]");

    w.finished("r1", result_of(HookStatus::succeeded), OutputFiles{}, t0 + std::chrono::milliseconds(10));
    // Still due when the start was: ending does not push the write back.
    CHECK(*w.next_due() == t0 + ResultWriteBehind::k_delay);
    auto writes = nlohmann::json::parse(w.take(t0 + ResultWriteBehind::k_delay));
    REQUIRE(writes.size() == 1);
    CHECK(writes[0]["id"] == "r1");
    CHECK(writes[0]["started"] == true);
    CHECK(writes[0]["process_id"] == "p1");
    CHECK(writes[0]["ended"] == true);
    CHECK(writes[0]["status"] == "succeeded");
    CHECK(w.empty());

    // A start written on its own, then the end: the end carries no second start.
    w.started("r2", "p2", t0);
    REQUIRE(nlohmann::json::parse(w.take(Clock::time_point::max())).size() == 1);
    w.finished("r2", result_of(HookStatus::failed, "boom"), OutputFiles{}, t0);
    writes = nlohmann::json::parse(w.take(Clock::time_point::max()));
    REQUIRE(writes.size() == 1);
    CHECK(writes[0]["started"] == false);
    CHECK(writes[0]["ended"] == true);
    CHECK(writes[0]["error"] == "boom");

    // U+0000, which PostgreSQL cannot store, is dropped from every string.
    auto nul = result_of(HookStatus::succeeded);
    nul.output_str = std::string("a\0b", 3);
    nul.output_json = {{std::string("k\0", 2), {std::string("x\0y", 3)}}};
    w.finished("r3", nul, OutputFiles{}, t0);
    writes = nlohmann::json::parse(w.take(Clock::time_point::max()));
    REQUIRE(writes.size() == 1);
    CHECK(writes[0]["output_str"] == "ab");
    CHECK(writes[0]["output_json"] == nlohmann::json{{"k", {"xy"}}});
}

TEST_CASE("snapshot store: results are held until due or until the seal - which writes them first",
          "[result_write_behind]")
{
    StoreFixture f;
    auto& store = *f.store;
    const auto& a = f.result_a;
    const auto& b = f.result_b;

    store.mark_started(a, f.process_a);
    store.flush_results(); // not due yet
    CHECK(f.row_of(a) == "queued/0/f/f/f/-/-");
    store.flush_results(true);
    CHECK(f.row_of(a) == "started/1/t/t/f/-/-");

    store.record(a, result_of(HookStatus::succeeded), OutputFiles{});
    f.ran(b, f.process_b, HookStatus::failed, "boom");
    CHECK(f.row_of(b) == "queued/0/f/f/f/-/-");
    CHECK(store.seal() == "partial");
    CHECK(f.row_of(a) == "succeeded/1/t/t/t/out/-");
    CHECK(f.row_of(b) == "failed/1/t/t/t/out/boom");
    CHECK(f.scalar("SELECT process_id FROM archive_result WHERE id = " + f.conn->quote(b)) == f.process_b);
    // start_ts and end_ts are the database's clock, no later than the statement.
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE start_ts <= end_ts AND end_ts <= now()") == "2");
}

TEST_CASE("snapshot store: a worker that lost the lease writes no held result", "[result_write_behind]")
{
    StoreFixture f;
    auto& store = *f.store;
    const auto& a = f.result_a;
    f.ran(a, f.process_a, HookStatus::succeeded);
    pqxx::nontransaction(*f.conn).exec0("UPDATE snapshot SET lease_owner = gen_random_uuid()");
    CHECK_THROWS_AS(store.flush_results(true), LeaseLost);
    CHECK(f.row_of(a) == "queued/0/f/f/f/-/-");
}

TEST_CASE("snapshot store: seal and claim next writes the held results in its statement - their failure decides the "
          "outcome",
          "[result_write_behind]")
{
    StoreFixture f;
    auto& store = *f.store;
    const auto& a = f.result_a;
    const auto& b = f.result_b;
    f.ran(a, f.process_a, HookStatus::failed, "a failed");
    f.ran(b, f.process_b, HookStatus::failed, "b failed");
    // The crawl is not leased to this owner: the seal happens, no claim does.
    auto step = store.seal_and_claim_next(random_uuid(), std::chrono::seconds(30));
    CHECK(step.outcome == "failed");
    CHECK_FALSE(step.next);
    CHECK(f.row_of(a) == "failed/1/t/t/t/out/a failed");
    CHECK(f.row_of(b) == "failed/1/t/t/t/out/b failed");
    CHECK(f.scalar("SELECT status || '/' || error FROM snapshot") == "sealed/2 of 2 hooks failed");
}

// A seal with nothing held (every result written as it came, as those of hooks
// slower than the write-behind window are) runs the statement without the held
// rows: the outcome is the table's alone.
TEST_CASE("snapshot store: a seal with no held result derives the outcome from the stored results - both seal "
          "statements",
          "[result_write_behind]")
{
    SECTION("seal")
    {
        StoreFixture f;
        f.ran(f.result_a, f.process_a, HookStatus::succeeded);
        f.ran(f.result_b, f.process_b, HookStatus::failed, "b failed");
        f.store->flush_results(true);
        CHECK(f.store->seal() == "partial");
        CHECK(f.scalar("SELECT status || '/' || error FROM snapshot") == "sealed/1 of 2 hooks failed");
        CHECK(f.row_of(f.result_b) == "failed/1/t/t/t/out/b failed");
        // The statement without held rows ran (the store prepares on this connection).
        CHECK(f.scalar("SELECT string_agg(name, ',') FROM pg_prepared_statements WHERE name LIKE 'snapshot_store.seal.%'") ==
              "snapshot_store.seal.e0.none_held");
    }
    SECTION("seal and claim next")
    {
        StoreFixture f;
        f.ran(f.result_a, f.process_a, HookStatus::failed, "a failed");
        f.ran(f.result_b, f.process_b, HookStatus::failed, "b failed");
        f.store->flush_results(true);
        auto step = f.store->seal_and_claim_next(random_uuid(), std::chrono::seconds(30));
        CHECK(step.outcome == "failed");
        CHECK(f.scalar("SELECT status || '/' || error FROM snapshot") == "sealed/2 of 2 hooks failed");
        CHECK(f.scalar("SELECT string_agg(name, ',') FROM pg_prepared_statements "
                       "WHERE name LIKE 'snapshot_store.seal_and_claim_next.%'") ==
              "snapshot_store.seal_and_claim_next.e0.none_held");
    }
    SECTION("nothing run: succeeded")
    {
        StoreFixture f;
        CHECK(f.store->seal() == "succeeded");
    }
}
