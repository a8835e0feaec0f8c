#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

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
    tx.exec_params0("DELETE FROM archive_result WHERE id = $1", result);
    CHECK(labelled("archive_result_id") == 0);
    CHECK(labelled("snapshot_id") == 1);
    tx.exec_params0("DELETE FROM snapshot WHERE id = $1", snapshot);
    CHECK(labelled("snapshot_id") == 0);
    CHECK(labelled("crawl_id") == 2);
    tx.exec_params0("DELETE FROM crawl WHERE id = $1", crawl);
    CHECK(labelled("crawl_id") == 0);
    CHECK(labelled("*") == 2);
    tx.commit();
    {
        pqxx::work refused(*conn);
        CHECK_THROWS_AS(refused.exec0("DELETE FROM machine WHERE id = 'm1'"), pqxx::foreign_key_violation);
    }
    pqxx::work last(*conn);
    last.exec0("DELETE FROM process");
    CHECK_NOTHROW(last.exec0("DELETE FROM machine WHERE id = 'm1'"));
}
