#include "tests/ops/ops_fixture.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace orch::test;
using namespace orch::test::ops_ids;

TEST_CASE("ops: cancel seals a crawl nobody runs - and only requests it for a leased one", "[ops]")
{
    OpsTree tree;
    auto r = tree.run({"cancel", c2});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("cancelled (1 unfinished snapshots sealed)") != std::string::npos);
    CHECK(tree.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = '" + c2 + "'") == "sealed/cancelled");
    CHECK(tree.scalar("SELECT status || '/' || outcome FROM snapshot WHERE id = '" + s4 + "'") == "sealed/cancelled");
    CHECK(tree.scalar("SELECT status FROM archive_result WHERE snapshot_id = '" + s4 + "'") == "failed");
    auto again = tree.run({"cancel", c2});
    CHECK(again.exit_code == 0);
    CHECK(again.out.find("already sealed (cancelled)") != std::string::npos);

    auto leased = tree.run({"cancel", c1});
    REQUIRE(leased.exit_code == 0);
    CHECK(leased.out.find("cancel requested") != std::string::npos);
    CHECK(leased.out.find(crawl_worker) != std::string::npos);
    CHECK(tree.scalar("SELECT status FROM crawl WHERE id = '" + c1 + "'") == "started");
    CHECK(tree.scalar("SELECT cancel_requested_at IS NOT NULL FROM crawl WHERE id = '" + c1 + "'") == "t");
    CHECK(tree.scalar("SELECT status FROM snapshot WHERE id = '" + s3 + "'") == "started");

    CHECK(tree.run({"cancel", "00000000-0000-4000-8000-00000000ffff"}).exit_code == 6);
    CHECK(tree.run({"cancel", "not-an-id"}).exit_code == 7);
}

TEST_CASE("ops: pause and resume - a crawl nobody runs and a leased one - show and status see it", "[ops]")
{
    OpsTree tree;
    auto crawl_row = [&](const std::string& id) {
        return tree.scalar("SELECT status || '/' || (lease_owner IS NULL) FROM crawl "
                           "WHERE id = '" + id + "'");
    };
    auto paused = tree.run({"pause", c2, "--reason", "site asked us to stop"});
    INFO(paused.out << paused.err);
    REQUIRE(paused.exit_code == 0);
    CHECK(paused.out == "crawl " + c2 + " paused\n");
    CHECK(crawl_row(c2) == "paused/true");
    CHECK(tree.run({"pause", c2}).out.find("already paused") != std::string::npos);
    auto show = tree.run({"show", "crawl", c2});
    INFO(show.out << show.err);
    CHECK(show.out.find("orchestrator resume " + c2) != std::string::npos);
    CHECK(show.out.find("paused    since 20") != std::string::npos);
    CHECK(show.out.find("site asked us to stop") != std::string::npos); // its journal event
    CHECK(tree.run({"status"}).out.find("1 started, 1 paused") != std::string::npos);

    // The leased crawl keeps its holder, which drains and releases it.
    auto leased = tree.run({"pause", c1});
    REQUIRE(leased.exit_code == 0);
    CHECK(leased.out.find("process " + crawl_worker) != std::string::npos);
    CHECK(crawl_row(c1) == "paused/false");
    auto carries_on = tree.run({"resume", c1});
    REQUIRE(carries_on.exit_code == 0);
    CHECK(carries_on.out.find("carries on") != std::string::npos);
    CHECK(crawl_row(c1) == "started/false");

    auto resumed = tree.run({"resume", c2});
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed.out.find("takes it up") != std::string::npos);
    CHECK(tree.scalar("SELECT status || '/' || (retry_at <= now()) FROM crawl WHERE id = '" + c2 + "'") ==
          "queued/true");
    CHECK(tree.run({"resume", c2}).out.find("is not paused (queued)") != std::string::npos);
    CHECK(tree.scalar("SELECT count(*) FROM event WHERE kind = 'crawl.paused' AND actor = 'cli'") == "2");
    CHECK(tree.scalar("SELECT count(*) FROM event WHERE kind = 'crawl.resumed' AND actor = 'cli'") == "2");

    // A paused crawl nobody runs is cancelled at once; a sealed one has nothing to pause.
    REQUIRE(tree.run({"pause", c2}).exit_code == 0);
    CHECK(tree.run({"cancel", c2}).out.find("cancelled") != std::string::npos);
    CHECK(tree.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = '" + c2 + "'") == "sealed/cancelled");
    CHECK(tree.run({"pause", c2}).out.find("already sealed (cancelled)") != std::string::npos);
    CHECK(tree.run({"resume", c2}).out.find("not paused (sealed, cancelled)") != std::string::npos);

    CHECK(tree.run({"pause", "00000000-0000-4000-8000-00000000ffff"}).exit_code == 6);
    CHECK(tree.run({"resume", "not-an-id"}).exit_code == 7);

    // Several ids: a malformed one refuses them all; an unknown one is named after the others were done.
    CHECK(tree.run({"pause", c1, "not-an-id"}).exit_code == 7);
    CHECK(crawl_row(c1) == "started/false");
    const std::string unknown = "00000000-0000-4000-8000-00000000ffff";
    auto some = tree.run({"pause", unknown, c1});
    INFO(some.out << some.err);
    CHECK(some.exit_code == 6);
    CHECK(some.err.find("1 of 2 crawls not found: " + unknown) != std::string::npos);
    CHECK(crawl_row(c1) == "paused/false");
    auto both = tree.run({"resume", c1, c2});
    CHECK(both.exit_code == 0);
    CHECK(both.out.find("crawl " + c1 + " resumed") != std::string::npos);
    CHECK(both.out.find("crawl " + c2 + " is not paused") != std::string::npos);
}

TEST_CASE("ops: retry refuses running work and queues failed results - snapshots and the crawl again", "[ops]")
{
    OpsTree tree;
    auto running = tree.run({"retry", s2});
    CHECK(running.exit_code == 8);
    CHECK(running.err.find("crawl " + c1 + " is running") != std::string::npos);

    // The crawl worker ends; the crawl is sealed partial, S3 failed too.
    const std::string sealer = "00000000-0000-4000-8000-00000000beef";
    tree.exec("UPDATE crawl SET status = 'sealed', outcome = 'partial', sealed_at = now(), retry_at = NULL, "
              "lease_owner = NULL, lease_expires_at = NULL, sealed_by = '" + sealer + "' WHERE id = '" + c1 + "'");
    tree.exec("UPDATE snapshot SET status = 'sealed', outcome = 'timed_out', sealed_at = now(), lease_owner = NULL, "
              "lease_expires_at = NULL, sealed_by = '" + sealer + "' WHERE id = '" + s3 + "'");
    // Who sealed it, as `show` says.
    auto shown = tree.run({"show", "snapshot", s3});
    CHECK(shown.out.find(" by " + sealer + "\n") != std::string::npos);
    CHECK(nlohmann::json::parse(tree.run({"show", "crawl", c1, "--json"}).out)["sealed_by"] == sealer);
    auto nothing = tree.run({"retry", s1});
    CHECK(nothing.exit_code == 0);
    CHECK(nothing.out.find("nothing to retry") != std::string::npos);

    auto one = tree.run({"retry", s2});
    INFO(one.out << one.err);
    REQUIRE(one.exit_code == 0);
    CHECK(one.out.find("1 snapshot, 1 failed result; crawl " + c1 + " is queued") != std::string::npos);
    CHECK(tree.scalar("SELECT status || '/' || coalesce(outcome, '-') || '/' || attempts FROM snapshot WHERE id = '" +
                      s2 + "'") == "queued/-/0");
    CHECK(tree.scalar("SELECT status FROM archive_result WHERE snapshot_id = '" + s2 +
                      "' AND plugin = 'wget'") == "queued");
    CHECK(tree.scalar("SELECT status FROM archive_result WHERE snapshot_id = '" + s2 +
                      "' AND plugin = 'title'") == "succeeded");
    CHECK(tree.scalar("SELECT status || '/' || coalesce(outcome, '-') || '/' || (retry_at IS NOT NULL) FROM crawl "
                      "WHERE id = '" + c1 + "'") == "queued/-/true");
    CHECK(tree.scalar("SELECT count(*) FROM crawl WHERE sealed_by IS NOT NULL") == "0");
    CHECK(tree.scalar("SELECT status FROM snapshot WHERE id = '" + s3 + "'") == "sealed");

    // The whole crawl: S3 (timed out) is queued again as well.
    auto crawl = tree.run({"retry", c1});
    REQUIRE(crawl.exit_code == 0);
    CHECK(tree.scalar("SELECT status || '/' || coalesce(sealed_by::text, '-') FROM snapshot WHERE id = '" + s3 + "'") ==
          "queued/-");
    CHECK(tree.scalar("SELECT status FROM snapshot WHERE id = '" + s1 + "'") == "sealed");

    CHECK(tree.run({"retry", "00000000-0000-4000-8000-00000000ffff"}).exit_code == 6);
    CHECK(tree.run({"retry", "bad"}).exit_code == 7);
}

TEST_CASE("ops: prune deletes old exited rows and their logs - never live rows - lease owners or parents of live rows",
          "[ops]")
{
    OpsTree tree;
    auto old_log = tree.dir() / "old.stdout.log";
    std::ofstream(old_log) << "old\n";
    // SW1/H1 and SW2/H2 ended long ago; H2 is a lease owner of S4 (stale lease); the crawl worker is running.
    tree.exec("UPDATE process SET ended_at = now() - interval '40 days' WHERE status = 'exited'");
    tree.exec("UPDATE process SET stdout_path = '" + old_log.string() + "' WHERE id = '" + sw1 + "'");
    tree.exec("UPDATE snapshot SET lease_owner = '" + h2 + "', lease_expires_at = now() - interval '1 day' "
              "WHERE id = '" + s4 + "'");
    // A running row under an exited parent keeps that parent.
    tree.exec("UPDATE process SET parent_id = '" + sw2 + "' WHERE id = '" + sw3 + "'");

    auto dry = tree.run({"prune", "--older-than", "30d", "--dry-run"});
    INFO(dry.out << dry.err);
    REQUIRE(dry.exit_code == 0);
    CHECK(dry.out.find("would delete 2 exited process rows older than 30 days") != std::string::npos);
    CHECK(tree.scalar("SELECT count(*) FROM process") == "8");

    auto r = tree.run({"prune", "--older-than", "30d"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("deleted 2 exited process rows") != std::string::npos);
    CHECK(r.out.find("and 1 log files") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(old_log));
    CHECK(tree.scalar("SELECT string_agg(id::text, ',' ORDER BY id) FROM process WHERE id IN ('" + sw1 + "', '" + h1 +
                      "')") == "NULL");
    CHECK(tree.scalar("SELECT count(*) FROM process WHERE id IN ('" + sw2 + "', '" + h2 + "', '" + sw3 + "')") == "3");
    CHECK(std::filesystem::exists(tree.dir() / "h2.stderr.log"));
    CHECK(tree.run({"prune", "--older-than", "1d"}).out.find("deleted 0") != std::string::npos);
    CHECK(tree.run({"prune", "--older-than", "soon"}).exit_code == 7);
}

TEST_CASE("ops: prune unlinks the results of the rows it deletes - one join per DELETE - not a scan of the results "
          "per row",
          "[ops]")
{
    OpsTree tree;
    // 300 old exited hooks, each the process of one result; one recent hook linked the same way.
    tree.exec("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status) "
              "SELECT '" + s4 + "', 'bulk', 'on_Snapshot__10_bulk_' || g, 'succeeded' FROM generate_series(0, 300) g");
    tree.exec("INSERT INTO process (machine_id, process_type, status, pid, exit_code, end_reason, started_at, ended_at, "
              " archive_result_id) "
              "SELECT '" + tree.machine_id() + "', 'hook', 'exited', 1000 + g, 0, 'exited', now() - interval '40 days', "
              " CASE WHEN g = 0 THEN now() ELSE now() - interval '40 days' END, ar.id "
              "FROM archive_result ar, LATERAL (SELECT substring(ar.hook_name FROM '[0-9]+$')::int AS g) n "
              "WHERE ar.plugin = 'bulk'");
    tree.exec("UPDATE archive_result ar SET process_id = p.id FROM process p WHERE p.archive_result_id = ar.id");
    tree.exec("ANALYZE");
    auto conn = tree.db().connect();
    // Sequential scans of the results so far, once every other backend (each
    // tree.exec, tree.run's orchestrator) is gone: a backend flushes its
    // statistics when it exits.
    auto result_scans = [&] {
        REQUIRE(eventually(
            [&] {
                return tree.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                   " AND pid NOT IN (pg_backend_pid(), " + std::to_string(conn->backendpid()) + ") "
                                   " AND backend_type = 'client backend'") == "0";
            },
            std::chrono::seconds(10)));
        pqxx::nontransaction tx(*conn);
        tx.exec("SELECT pg_stat_clear_snapshot()");
        return tx.exec1("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'archive_result'")[0].as<long>();
    };
    const long before = result_scans();

    auto r = tree.run({"prune", "--older-than", "30d"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("deleted 300 exited process rows") != std::string::npos);
    CHECK(tree.scalar("SELECT count(*) FROM archive_result WHERE plugin = 'bulk' AND process_id IS NOT NULL") == "1");
    CHECK(tree.scalar("SELECT hook_name FROM archive_result WHERE plugin = 'bulk' AND process_id IS NOT NULL") ==
          "on_Snapshot__10_bulk_0");
    // A few scans per run, whatever it deletes (the trigger's join runs once per
    // DELETE statement, and on a table this small the planner scans it); a foreign
    // key ON DELETE SET NULL without an index scanned the results once per deleted
    // row (300 here).
    CHECK(result_scans() - before < 10);
}
