// snapshot_worker under interruption: competing workers, a lease taken away,
// SIGKILL mid-hook (crash) and SIGTERM.
#include "tests/workers/worker_fixture.hpp"

#include "tests/support/row_history.hpp"

#include "common/recorder/recovery.hpp"
#include "common/recorder/self_registration.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

using namespace orch::test;
using namespace std::chrono_literals;

namespace {

const std::string k_succeeded = R"({"type":"ArchiveResult","status":"succeeded"})";

// A hook that appends `tag` to `runs`, then (unless `quick` exists) starts a
// child that ignores SIGTERM and waits forever; with `quick` it succeeds at once.
std::string slow_hook(const std::filesystem::path& runs, const std::string& tag, const std::filesystem::path& quick)
{
    return "echo " + tag + " >> '" + runs.string() + "'\n" + "if [ -e '" + quick.string() + "' ]; then echo '" +
           k_succeeded + "'; exit 0; fi\n" + "( trap '' TERM; sleep 303; true ) &\nsleep 300 &\nwait\n";
}

bool has_line(const std::filesystem::path& path, const std::string& line)
{
    return count_lines(path, line) > 0;
}

} // namespace

TEST_CASE("snapshot_worker: of two workers started together for one snapshot exactly one runs the hooks",
          "[snapshot_worker][lease]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    auto runs = f.file("runs");
    f.write_hook("p", "on_Snapshot__10_once.sh", "echo run >> '" + runs.string() + "'\nsleep 2\necho '" + k_succeeded + "'\n");
    auto a = f.start_worker(snap);
    auto b = f.start_worker(snap);
    REQUIRE(a->wait_for(60s));
    REQUIRE(b->wait_for(60s));
    INFO(a->err());
    INFO(b->err());
    std::multiset<int> codes{a->exit_code(), b->exit_code()};
    CHECK(codes == std::multiset<int>{0, 8});
    CHECK(read_lines(runs).size() == 1);
    CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook'") == "1");
    CHECK(f.scalar("SELECT count(*) FROM archive_result") == "1");
    CHECK(f.scalar("SELECT status FROM archive_result") == "succeeded");
    CHECK(f.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = $1", {snap}) == "sealed/succeeded");
    // Both workers registered and closed their own rows with their exit codes.
    CHECK(f.scalar("SELECT string_agg(exit_code::text, ',' ORDER BY exit_code) FROM process "
                   "WHERE process_type = 'worker' AND status = 'exited'") == "0,8");
}

TEST_CASE("snapshot_worker: a worker whose lease is taken away stops writing - tears down its hook and exits 8",
          "[snapshot_worker][lease]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    auto runs = f.file("runs");
    f.write_hook("p", "on_Snapshot__10_slow.sh", slow_hook(runs, "slow", f.file("never")));
    f.write_hook("p", "on_Snapshot__20_after.sh", "echo after >> '" + runs.string() + "'\n");
    auto w = f.start_worker(snap, {{"LEASE_TTL", "3"}});
    REQUIRE(eventually([&] { return has_line(runs, "slow"); }, 20s));
    // The start is written shortly after the hook starts (the result write-behind).
    REQUIRE(eventually([&] { return f.results(snap)["on_Snapshot__10_slow.sh"].status == "started"; }, 20s));

    auto thief = f.scalar("SELECT gen_random_uuid()::text");
    auto taken_at = f.scalar("UPDATE snapshot SET lease_owner = $2::uuid, lease_expires_at = now() + interval '1 hour' "
                             "WHERE id = $1 RETURNING clock_timestamp()::text",
                             {snap, thief});
    REQUIRE(w->wait_for(20s));
    INFO(w->err());
    CHECK(w->exit_code() == 8);
    CHECK_THAT(w->err(), Catch::Contains("lost the lease"));
    // Nothing was written to the snapshot's rows after the lease changed hands.
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE snapshot_id = $1 AND modified_at >= $2::timestamptz",
                   {snap, taken_at}) == "0");
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_slow.sh"].status == "started");
    CHECK(r["on_Snapshot__20_after.sh"].status == "queued");
    CHECK(f.scalar("SELECT status || '/' || lease_owner FROM snapshot WHERE id = $1", {snap}) == "started/" + thief);
    CHECK_FALSE(has_line(runs, "after"));
    // The row reserved for the hook that never ran is closed, not left queued.
    CHECK(f.scalar("SELECT status || '/' || end_reason || '/' || (pid IS NULL) FROM process "
                   "WHERE hook_name LIKE '%on_Snapshot__20_after.sh'") == "exited/not_started/true");
    CHECK(f.scalar("SELECT count(*) FROM process WHERE status <> 'exited'") == "0");
    auto left = f.wait_no_leftovers();
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
}

TEST_CASE("snapshot_worker: after SIGKILL mid-hook - recovery and a rerun seal the snapshot without rerunning "
          "succeeded hooks",
          "[snapshot_worker][crash]")
{
    WorkerFixture f;
    f.containment = GENERATE(as<std::string>{}, "", "fallback");
    INFO("containment: " << (f.containment.empty() ? "probed" : f.containment));
    auto snap = f.add_simple_snapshot();
    auto runs = f.file("runs");
    auto quick = f.file("quick");
    f.write_hook("p", "on_Snapshot__10_first.sh", "echo first >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");
    f.write_hook("p", "on_Snapshot__15_skips.sh", "echo skips >> '" + runs.string() + "'\nexit 10\n");
    f.write_hook("p", "on_Snapshot__20_slow.sh", slow_hook(runs, "slow", quick));
    f.write_hook("p", "on_Snapshot__30_last.sh", "echo last >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");
    f.write_hook("q", "on_Snapshot__10_fails.sh", "echo fails >> '" + runs.string() + "'\nexit 1\n");

    auto w = f.start_worker(snap, {{"LEASE_TTL", "2"}});
    REQUIRE(eventually([&] { return has_line(runs, "slow"); }, 20s));
    REQUIRE(eventually([&] { return f.results(snap)["on_Snapshot__20_slow.sh"].status == "started"; }, 10s));
    w->signal(SIGKILL);
    REQUIRE(w->wait_for(10s));
    CHECK(w->term_signal() == SIGKILL);
    // The hook tree outlived its worker.
    CHECK_FALSE(f.leftover_processes().empty());

    // Recovery, as the orchestrator will run it: kill the orphaned trees, close their rows.
    {
        auto conn = f.db.connect();
        auto machine = f.scalar("SELECT machine_id FROM process WHERE process_type = 'worker'");
        orch::RecoveryOptions options;
        options.containment.scope = orch::containment_scope(f.data.string());
        options.containment.force_fallback = f.containment == "fallback";
        options.grace = 500ms;
        auto report = orch::cleanup_stale_running(*conn, machine, options);
        CHECK(report.killed_on_recovery >= 1);
    }
    auto left = f.wait_no_leftovers();
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
    CHECK(f.scalar("SELECT count(*) FROM process WHERE status <> 'exited'") == "0");

    // The lease expires (TTL 2 s) and a new worker resumes.
    REQUIRE(eventually([&] { return f.scalar("SELECT lease_expires_at < now() FROM snapshot WHERE id = $1", {snap}) == "t"; },
                       10s));
    std::ofstream(quick.string()) << "";
    auto again = f.run_worker(snap);
    INFO(again->err());
    REQUIRE(again->exit_code() == 0);
    CHECK(f.scalar("SELECT status FROM snapshot WHERE id = $1", {snap}) == "sealed");
    CHECK(count_lines(runs, "first") == 1);
    CHECK(count_lines(runs, "skips") == 1);
    CHECK(count_lines(runs, "slow") == 2);
    CHECK(count_lines(runs, "last") == 1);
    CHECK(count_lines(runs, "fails") == 2); // failed hooks are retried
    auto r = f.results(snap);
    CHECK(r.size() == 5);
    CHECK(r["on_Snapshot__20_slow.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__20_slow.sh"].attempts == 2);
    CHECK(r["on_Snapshot__10_first.sh"].attempts == 1);
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE snapshot_id = $1", {snap}) == "5");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot_worker: SIGTERM tears down the running hook - requeues it - releases the lease - exits 10",
          "[snapshot_worker][sigterm]")
{
    WorkerFixture f;
    f.containment = GENERATE(as<std::string>{}, "", "fallback");
    INFO("containment: " << (f.containment.empty() ? "probed" : f.containment));
    auto snap = f.add_simple_snapshot();
    auto runs = f.file("runs");
    auto quick = f.file("quick");
    f.write_hook("p", "on_Snapshot__10_first.sh", "echo first >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");
    f.write_hook("p", "on_Snapshot__20_slow.sh", slow_hook(runs, "slow", quick));
    f.write_hook("p", "on_Snapshot__30_after.sh", "echo after >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");

    auto w = f.start_worker(snap);
    REQUIRE(eventually([&] { return has_line(runs, "slow"); }, 20s));
    w->signal(SIGTERM);
    REQUIRE(w->wait_for(20s));
    INFO(w->err());
    CHECK(w->exit_code() == 10);
    auto left = f.wait_no_leftovers(2s);
    INFO(::Catch::Detail::stringify(left));
    CHECK(left.empty());
    auto r = f.results(snap);
    CHECK(r["on_Snapshot__10_first.sh"].status == "succeeded");
    CHECK(r["on_Snapshot__20_slow.sh"].status == "queued");
    CHECK_THAT(r["on_Snapshot__20_slow.sh"].error, Catch::Contains("interrupted"));
    CHECK(r["on_Snapshot__30_after.sh"].status == "queued");
    CHECK_FALSE(has_line(runs, "after"));
    // Its row, written with the others' before the first hook ran, is closed as never started.
    CHECK(f.scalar("SELECT status || '/' || end_reason || '/' || (pid IS NULL) FROM process "
                   "WHERE hook_name LIKE '%on_Snapshot__30_after.sh'") == "exited/not_started/true");
    CHECK(f.scalar("SELECT outcome FROM ops.process_exits WHERE hook_name LIKE '%on_Snapshot__30_after.sh'") ==
          "not_started");
    CHECK(f.scalar("SELECT status || '/' || (lease_owner IS NULL) || '/' || (lease_expires_at IS NULL) "
                   "FROM snapshot WHERE id = $1",
                   {snap}) == "started/true/true");
    CHECK(f.scalar("SELECT count(*) FROM process WHERE status <> 'exited'") == "0");
    CHECK(f.scalar("SELECT exit_code FROM process WHERE process_type = 'worker'") == "10");

    std::ofstream(quick.string()) << "";
    auto again = f.run_worker(snap);
    INFO(again->err());
    REQUIRE(again->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = $1", {snap}) == "sealed/succeeded");
    CHECK(count_lines(runs, "first") == 1);
    CHECK(count_lines(runs, "slow") == 2);
    CHECK(count_lines(runs, "after") == 1);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot_worker: a hook that ends on its own as the stop arrives keeps its result - it is not rerun",
          "[snapshot_worker][sigterm]")
{
    // The hook reports success, stops its own worker and exits at once: its
    // exit races the worker's teardown. Here the SIGTERM mostly meets the shell
    // on its way out (it reported, then died of the stop); a hook that ended
    // before the SIGTERM is test_teardown.cpp's unreaped-leader case
    // (stop_signalled false). Either way the hook finished its work, and
    // requeueing it would run a succeeded hook twice: before the fix, all 6
    // were requeued and rerun.
    WorkerFixture f;
    auto runs = f.file("runs");
    auto pidfile = f.file("worker.pid");
    f.write_hook("p", "on_Snapshot__10_ends.sh",
                 "while [ ! -s '" + pidfile.string() + "' ]; do sleep 0.01; done\n"
                 "echo ends >> '" + runs.string() + "'\n"
                 "echo '" + k_succeeded + "'\n"
                 "kill -TERM \"$(cat '" + pidfile.string() + "')\"\n"
                 "exit 0\n");
    f.write_hook("p", "on_Snapshot__20_after.sh", "echo after >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");
    constexpr int k_snapshots = 6;
    std::vector<std::string> snaps;
    for (int i = 0; i < k_snapshots; ++i) {
        snaps.push_back(f.add_snapshot(f.add_crawl(), "http://a.test/" + std::to_string(i)));
    }
    for (const auto& snap : snaps) {
        std::filesystem::remove(pidfile);
        auto w = f.start_worker(snap);
        std::ofstream(pidfile.string()) << w->pid() << "\n";
        REQUIRE(w->wait_for(20s));
        INFO(w->err());
        CHECK(w->exit_code() == 10);
        auto r = f.results(snap);
        CHECK(r["on_Snapshot__10_ends.sh"].status == "succeeded");
        CHECK(r["on_Snapshot__20_after.sh"].status == "queued");
    }
    CHECK(count_lines(runs, "ends") == k_snapshots);
    CHECK(count_lines(runs, "after") == 0);
    // The next run of each snapshot runs only what the stop kept from running.
    std::ofstream(pidfile.string()) << "2147483647\n"; // no such process: a rerun would not stop itself
    for (const auto& snap : snaps) {
        auto again = f.run_worker(snap);
        INFO(again->err());
        REQUIRE(again->exit_code() == 0);
        CHECK(f.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = $1", {snap}) == "sealed/succeeded");
    }
    CHECK(count_lines(runs, "ends") == k_snapshots);
    CHECK(count_lines(runs, "after") == k_snapshots);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("snapshot_worker: a lease its crawl worker claimed for it is taken as granted - one held by another stops "
          "it before any hook",
          "[snapshot_worker][lease]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    auto runs = f.file("runs");
    f.write_hook("p", "on_Snapshot__10_first.sh", "echo first >> '" + runs.string() + "'\necho '" + k_succeeded + "'\n");
    // What a crawl worker does before it starts one: a prepared row, the snapshot
    // leased to it, and the moment of that claim on the command line.
    f.exec("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('granted-test', 'h', 'b', 1)");
    auto prepared_row = [&] {
        return f.scalar("INSERT INTO process (machine_id, process_type, status) "
                        "VALUES ('granted-test', 'worker', 'queued') RETURNING id");
    };
    auto lease_to = [&](const std::string& row) {
        f.exec("UPDATE snapshot SET status = 'started', attempts = 1, lease_owner = $1, "
               " lease_expires_at = now() + interval '1 hour' WHERE id = $2",
               {row, snap});
    };
    const auto claimed_at = std::to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
    auto run = [&](const std::string& row) {
        auto argv = f.worker_argv(snap);
        argv.insert(argv.end(), {"--process-id", row, "--lease-claimed-at", claimed_at, "--attempt", "1"});
        auto w = std::make_unique<SpawnedProcess>(argv, f.worker_env({{"MACHINE_ID", "granted-test"}}));
        REQUIRE(w->wait_for(30s));
        return w;
    };

    SECTION("granted: runs and seals")
    {
        auto row = prepared_row();
        lease_to(row);
        auto w = run(row);
        INFO(w->err());
        CHECK(w->exit_code() == 0);
        CHECK(f.scalar("SELECT status || '/' || outcome || '/' || attempts FROM snapshot WHERE id = $1", {snap}) ==
              "sealed/succeeded/1");
        CHECK(count_lines(runs, "first") == 1);
    }
    SECTION("leased to another row: lease lost (8) - no hook runs - the lease stays with its holder")
    {
        auto other = prepared_row();
        lease_to(other);
        auto w = run(prepared_row());
        INFO(w->err());
        CHECK(w->exit_code() == 8);
        CHECK_FALSE(std::filesystem::exists(runs));
        CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'hook'") == "0");
        CHECK(f.scalar("SELECT lease_owner FROM snapshot WHERE id = $1", {snap}) == other);
    }
}

TEST_CASE("snapshot_worker: the lease is renewed while timed-out hooks are torn down one after another - it never "
          "expires",
          "[snapshot_worker][lease]")
{
    WorkerFixture f;
    auto snap = f.add_simple_snapshot();
    // Three hooks that ignore SIGTERM time out together after 1 s; each is given
    // its 2 s grace in turn, about 6 s in all against a 3 s lease.
    f.write_config("stuck", R"({"timeout": 1})");
    for (const auto* name : {"on_Snapshot__10_a.sh", "on_Snapshot__10_b.sh", "on_Snapshot__10_c.sh"}) {
        f.write_hook("stuck", name, "trap '' TERM\nwhile :; do sleep 0.1; done\n");
    }
    // Every write to the snapshot row, each with the server's clock at the write:
    // the lease is judged from all of them, not from samples of its state.
    record_row_history(f.db.url(), "snapshot");
    auto w = f.start_worker(snap, {{"LEASE_TTL", "3"}, {"TEARDOWN_GRACE", "2"}, {"HOOK_PARALLELISM", "3"}});
    REQUIRE(w->wait_for(60s));
    INFO(w->err());
    CHECK(w->exit_code() == 0);
    REQUIRE(f.scalar("SELECT status FROM snapshot WHERE id = $1", {snap}) == "sealed");
    // A write to the row while it was leased that came after its expiry: the
    // lease had lapsed (anyone could have claimed it) by then. Each write while
    // leased (a renewal, the seal) must come before the expiry the previous
    // one left, so the lease covered every moment from the claim to the seal.
    const std::string lapsed_writes =
        "SELECT count(*) FROM test_row_history WHERE tbl = 'snapshot' AND new->>'id' = $1 "
        " AND old->>'lease_owner' IS NOT NULL AND at > (old->>'lease_expires_at')::timestamptz";
    const auto history = f.scalar(
        "SELECT string_agg(to_char(at, 'HH24:MI:SS.MS') || ' ' || coalesce(new->>'status', '') || ' expires ' || "
        " coalesce(to_char((new->>'lease_expires_at')::timestamptz, 'HH24:MI:SS.MS'), '-'), '; ' ORDER BY seq) "
        "FROM test_row_history WHERE tbl = 'snapshot' AND new->>'id' = $1",
        {snap});
    INFO("writes to the snapshot row: " << history);
    // The claim (the row's first lease), its renewals (the expiry moved on with
    // the same owner), and the seal.
    const auto claim_expiry = f.scalar("SELECT new->>'lease_expires_at' FROM test_row_history WHERE tbl = 'snapshot' "
                                       " AND new->>'id' = $1 AND old->>'lease_owner' IS NULL "
                                       " AND new->>'lease_owner' IS NOT NULL ORDER BY seq LIMIT 1",
                                       {snap});
    REQUIRE(!claim_expiry.empty());
    const auto renewals = std::stol(f.scalar(
        "SELECT count(*) FROM test_row_history WHERE tbl = 'snapshot' AND new->>'id' = $1 "
        " AND old->>'lease_owner' = new->>'lease_owner' "
        " AND (new->>'lease_expires_at')::timestamptz > (old->>'lease_expires_at')::timestamptz",
        {snap}));
    // 1 s to the timeouts, then three 2 s graces in turn: the teardowns (the
    // hooks' exits, as the worker saw them) went on well past the lease the
    // claim granted, so only its renewals can have kept it.
    CHECK(f.scalar("SELECT (max(ended_at) > $1::timestamptz + interval '2 seconds')::text FROM process "
                   "WHERE process_type = 'hook'",
                   {claim_expiry}) == "true");
    CHECK(renewals >= 3);
    CHECK(f.scalar(lapsed_writes, {snap}) == "0");
    // The same count sees a write after an expiry: a lease left to lapse, then a write.
    f.exec("UPDATE snapshot SET lease_owner = gen_random_uuid(), lease_expires_at = now() - interval '1 second' "
           "WHERE id = $1",
           {snap});
    f.exec("UPDATE snapshot SET modified_at = now() WHERE id = $1", {snap});
    CHECK(f.scalar(lapsed_writes, {snap}) == "1");
    for (const auto& [hook, r] : f.results(snap)) {
        INFO(hook);
        CHECK(r.status == "failed");
    }
}
