#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace orch::test;

namespace {

void add_machine(pqxx::connection& conn, const std::string& id)
{
    pqxx::work tx(conn);
    tx.exec_params0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ($1, 'h', 'b', 2)", id);
    tx.commit();
}

std::string add_crawl(pqxx::connection& conn)
{
    pqxx::work tx(conn);
    auto id = tx.exec1("INSERT INTO crawl (urls) VALUES (ARRAY['http://a.test/']) RETURNING id")[0].as<std::string>();
    tx.commit();
    return id;
}

} // namespace

TEST_CASE("one running orchestrator per machine and data directory", "[constraints]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    add_machine(*conn, "m1");
    add_machine(*conn, "m2");
    const char* insert = "INSERT INTO process (machine_id, process_type, status, pid, data_dir, started_at) "
                         "VALUES ($1, 'orchestrator', 'running', $2, $3, now())";
    {
        pqxx::work tx(*conn);
        tx.exec_params0(insert, "m1", 100, "/data");
        tx.commit();
    }
    {
        pqxx::work tx(*conn);
        CHECK_THROWS_AS(tx.exec_params0(insert, "m1", 101, "/data"), pqxx::unique_violation);
    }
    // Another data directory, or another machine, is fine.
    pqxx::work tx(*conn);
    CHECK_NOTHROW(tx.exec_params0(insert, "m1", 102, "/other"));
    CHECK_NOTHROW(tx.exec_params0(insert, "m2", 103, "/data"));
    // An exited orchestrator does not hold the gate.
    CHECK_NOTHROW(tx.exec_params0("INSERT INTO process (machine_id, process_type, status, pid, data_dir, ended_at) "
                                  "VALUES ('m1', 'orchestrator', 'exited', 104, '/data', now())"));
}

TEST_CASE("unknown status values are rejected", "[constraints]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    add_machine(*conn, "m1");
    auto crawl = add_crawl(*conn);
    auto check_rejected = [&](const std::string& sql) {
        pqxx::work tx(*conn);
        INFO(sql);
        CHECK_THROWS_AS(tx.exec_params0(sql, crawl), pqxx::check_violation);
    };
    check_rejected("UPDATE crawl SET status = 'bogus' WHERE id = $1");
    check_rejected("INSERT INTO snapshot (crawl_id, url, status) VALUES ($1, 'http://a.test/x', 'done')");
    check_rejected("INSERT INTO process (machine_id, process_type, status, crawl_id) VALUES ('m1', 'hook', 'zombie', $1)");
    check_rejected("INSERT INTO process (machine_id, process_type, crawl_id) VALUES ('m1', 'daemon', $1)");
    {
        pqxx::work tx(*conn);
        auto snap = tx.exec_params1("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/y') RETURNING id",
                                    crawl)[0]
                        .as<std::string>();
        CHECK_THROWS_AS(tx.exec_params0("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status) "
                                        "VALUES ($1, 'p', 'h', 'great')",
                                        snap),
                        pqxx::check_violation);
    }
    // A sealed crawl must say how it ended, and a running process must have a pid.
    check_rejected("UPDATE crawl SET status = 'sealed' WHERE id = $1");
    check_rejected("INSERT INTO process (machine_id, process_type, status, crawl_id) VALUES ('m1', 'hook', 'running', $1)");
}

TEST_CASE("a URL appears once per crawl", "[constraints]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    auto crawl = add_crawl(*conn);
    auto other = add_crawl(*conn);
    pqxx::work tx(*conn);
    tx.exec_params0("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/')", crawl);
    CHECK_NOTHROW(tx.exec_params0("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/')", other));
    CHECK_THROWS_AS(tx.exec_params0("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/')", crawl),
                    pqxx::unique_violation);
}

TEST_CASE("a deleted crawl snapshot or result leaves its process rows with the label cleared - a machine with "
          "process rows cannot be deleted",
          "[constraints]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    add_machine(*conn, "m1");
    const auto crawl = add_crawl(*conn);
    pqxx::work tx(*conn);
    const auto snapshot =
        tx.exec_params1("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/') RETURNING id", crawl)[0]
            .as<std::string>();
    const auto result = tx.exec_params1("INSERT INTO archive_result (snapshot_id, plugin, hook_name) "
                                        "VALUES ($1, 'p', 'p/h') RETURNING id",
                                        snapshot)[0]
                            .as<std::string>();
    const auto labelled = [&](const std::string& column) {
        return tx.exec1("SELECT count(" + column + ") FROM process")[0].as<int>();
    };
    tx.exec_params0("INSERT INTO process (machine_id, process_type, crawl_id, snapshot_id, archive_result_id) "
                    "VALUES ('m1', 'hook', $1, $2, $3), ('m1', 'hook', $1, NULL, NULL)",
                    crawl, snapshot, result);
    // A second result of the snapshot, and a snapshot of the crawl with its own
    // result: they go with their snapshot (0018's trigger, ON DELETE CASCADE before).
    tx.exec_params0("INSERT INTO archive_result (snapshot_id, plugin, hook_name) VALUES ($1, 'p', 'p/other')",
                    snapshot);
    const auto second = tx.exec_params1("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://b.test/') "
                                        "RETURNING id", crawl)[0].as<std::string>();
    tx.exec_params0("INSERT INTO archive_result (snapshot_id, plugin, hook_name) VALUES ($1, 'p', 'p/h')", second);
    const auto results = [&](const std::string& of) {
        return tx.exec_params1("SELECT count(*) FROM archive_result WHERE snapshot_id = $1", of)[0].as<int>();
    };
    tx.exec_params0("DELETE FROM archive_result WHERE id = $1", result);
    CHECK(labelled("archive_result_id") == 0);
    CHECK(labelled("snapshot_id") == 1);
    CHECK(results(snapshot) == 1);
    tx.exec_params0("DELETE FROM snapshot WHERE id = $1", snapshot);
    CHECK(labelled("snapshot_id") == 0);
    CHECK(labelled("crawl_id") == 2);
    CHECK(results(snapshot) == 0);
    CHECK(results(second) == 1);
    tx.exec_params0("DELETE FROM crawl WHERE id = $1", crawl);
    CHECK(labelled("crawl_id") == 0);
    CHECK(labelled("*") == 2);
    CHECK(results(second) == 0);
    CHECK(tx.exec1("SELECT count(*) FROM archive_result")[0].as<int>() == 0);
    // A deleted process leaves its children without a parent (ON DELETE SET NULL
    // before 0018), in the same statement, whoever else that statement deletes.
    const auto parent =
        tx.exec1("INSERT INTO process (machine_id, process_type) VALUES ('m1', 'cli') RETURNING id")[0].as<std::string>();
    tx.exec_params0("INSERT INTO process (machine_id, process_type, parent_id) VALUES ('m1', 'hook', $1), "
                    "('m1', 'hook', $1)", parent);
    tx.exec_params0("DELETE FROM process WHERE id = $1", parent);
    CHECK(tx.exec_params1("SELECT count(*) FROM process WHERE parent_id = $1", parent)[0].as<int>() == 0);
    CHECK(labelled("*") == 4);
    tx.commit();
    {
        pqxx::work refused(*conn);
        CHECK_THROWS_AS(refused.exec0("DELETE FROM machine WHERE id = 'm1'"), pqxx::foreign_key_violation);
    }
    pqxx::work last(*conn);
    last.exec0("DELETE FROM process");
    CHECK_NOTHROW(last.exec0("DELETE FROM machine WHERE id = 'm1'"));
}

TEST_CASE("every rule of the hot tables is enforced by one row check that names what it refuses", "[constraints]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    add_machine(*conn, "m1");
    const auto crawl = add_crawl(*conn);
    std::string snapshot;
    {
        pqxx::work tx(*conn);
        snapshot = tx.exec_params1("INSERT INTO snapshot (crawl_id, url) VALUES ($1, 'http://a.test/') RETURNING id",
                                   crawl)[0]
                       .as<std::string>();
        tx.exec_params0("INSERT INTO archive_result (snapshot_id, plugin, hook_name) VALUES ($1, 'p', 'p/h')",
                        snapshot);
        tx.exec0("INSERT INTO process (machine_id, process_type, status) VALUES ('m1', 'hook', 'queued')");
        tx.commit();
    }
    // Each statement breaks one rule of 0001's constraints; the message names it.
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"UPDATE process SET process_type = 'daemon'", "process_type 'daemon'"},
        {"UPDATE process SET worker_type = 'page'", "worker_type 'page'"},
        {"UPDATE process SET status = 'zombie'", "status 'zombie'"},
        {"UPDATE process SET pid = 0", "pid 0 is not positive"},
        {"UPDATE process SET containment = 'jail'", "containment 'jail'"},
        {"UPDATE process SET cmd = '{}'", "cmd is not a JSON array"},
        {"UPDATE process SET env = '[]'", "env is not a JSON object"},
        {"UPDATE process SET timeout_s = -1", "timeout_s -1 is not positive"},
        {"UPDATE process SET term_signal = 0", "term_signal 0 is not positive"},
        {"UPDATE process SET worker_type = 'crawl'", "worker_type is set on a hook row"},
        {"UPDATE process SET status = 'running'", "a running process has no pid"},
        {"UPDATE process SET status = 'exited'", "an exited process has no ended_at"},
        {"UPDATE snapshot SET url = ''", "url is empty"},
        {"UPDATE snapshot SET url = repeat('x', 8193)", "longer than 8192"},
        {"UPDATE snapshot SET depth = -1", "depth -1 is negative"},
        {"UPDATE snapshot SET status = 'done'", "status 'done'"},
        {"UPDATE snapshot SET outcome = 'great'", "outcome 'great'"},
        {"UPDATE snapshot SET attempts = -1", "attempts -1 is negative"},
        {"UPDATE snapshot SET status = 'sealed'", "only a sealed one, has an outcome"},
        {"UPDATE snapshot SET lease_expires_at = now()", "lease_owner and lease_expires_at are set together"},
        {"UPDATE archive_result SET plugin = ''", "plugin is empty"},
        {"UPDATE archive_result SET hook_name = ''", "hook_name is empty"},
        {"UPDATE archive_result SET status = 'great'", "status 'great'"},
        {"UPDATE archive_result SET output_files = '{}'", "output_files is not a JSON array"},
        {"UPDATE archive_result SET output_size = -1", "output_size -1 is negative"},
        {"UPDATE archive_result SET attempts = -1", "attempts -1 is negative"},
    };
    for (const auto& [sql, names] : refused) {
        INFO(sql);
        pqxx::work tx(*conn);
        try {
            tx.exec0(sql);
            FAIL("accepted");
        } catch (const pqxx::check_violation& e) {
            CHECK_THAT(e.what(), Catch::Contains(names));
        }
    }
    // Two broken rules are both named; a rule that comes out NULL passes, as in a CHECK.
    {
        pqxx::work tx(*conn);
        try {
            tx.exec0("UPDATE process SET pid = -1, status = 'zombie'");
            FAIL("accepted");
        } catch (const pqxx::check_violation& e) {
            CHECK_THAT(e.what(), Catch::Contains("status 'zombie'") && Catch::Contains("pid -1"));
        }
    }
    pqxx::work tx(*conn);
    CHECK_NOTHROW(tx.exec0("UPDATE process SET pid = NULL, timeout_s = NULL, term_signal = NULL, containment = NULL"));
    CHECK_NOTHROW(tx.exec0("UPDATE process SET status = 'exited', ended_at = now(), pid = 5, exit_code = 0"));
    CHECK_NOTHROW(tx.exec0("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded'"));
    CHECK_NOTHROW(tx.exec0("UPDATE archive_result SET status = 'succeeded', output_size = 10"));
}
