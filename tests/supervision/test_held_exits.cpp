// A hook's exit is held by its supervisor so that another statement can carry
// it (Supervisor::take_held_exits): the next launch's insert, an owner's
// statement, the supervisor's own timer, or its destructor.
#include "tests/supervision/supervision_fixture.hpp"

#include "common/recorder/process_table.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <set>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;


TEST_CASE("a held exit travels with the next launch's insert: identity - exit code - tails without NUL", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(GENERATE(false, true));
    options.exit_write_delay = 1h; // nothing but the next statement writes it
    Supervisor sup(*fx.conn, options);
    const auto first = sup.launch(fx.request({"sh", "-c", "printf 'a\\000b' >&2; exit 4"}));
    REQUIRE(first.started());
    REQUIRE(until_finished(sup, first.row_id));
    CHECK(fx.column(first.row_id, "status") == "queued");

    const auto next = sup.launch(fx.request({"sleep", "5"}));
    REQUIRE(next.started());
    CHECK(fx.column(first.row_id, "status") == "exited");
    CHECK(fx.column(first.row_id, "exit_code") == "4");
    CHECK(fx.column(first.row_id, "end_reason") == "exited");
    const auto tail = fx.column(first.row_id, "stderr_tail"); // the NUL did not fail the statement
    CHECK(tail.find('\0') == std::string::npos);
    CHECK((tail.size() >= 2 && tail.front() == 'a' && tail.back() == 'b'));
    CHECK(fx.column(first.row_id, "pid") == std::to_string(first.pid));
    CHECK_FALSE(fx.column(first.row_id, "start_ticks").empty());
    CHECK(fx.column(first.row_id, "(created_at <= started_at AND started_at <= ended_at)") == "true");
    // Written by the very transaction that inserted the next row.
    CHECK(fx.column(first.row_id, "xmin::text") == fx.column(next.row_id, "xmin::text"));
    sup.teardown({next.row_id}, 2s);
    CHECK(fx.column(next.row_id, "status") == "exited");
}

TEST_CASE("held exits are handed to the owner's statement - written by the timer - or by the destructor",
          "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.exit_write_delay = 1h;
    std::string late;
    {
        Supervisor sup(*fx.conn, options);
        const auto handed = sup.launch(fx.request({"true"}));
        REQUIRE(until_finished(sup, handed.row_id));
        const auto exits = process_table::exits_json(sup.take_held_exits());
        CHECK(sup.take_held_exits().empty());
        CHECK(fx.column(handed.row_id, "status") == "queued");
        {
            pqxx::work tx(*fx.conn);
            tx.exec_params("WITH ended AS (" + process_table::exits_update("$1") + ") SELECT 1", exits);
            tx.commit();
        }
        CHECK(fx.column(handed.row_id, "status") == "exited");
        CHECK(fx.column(handed.row_id, "exit_code") == "0");
        CHECK(fx.column(handed.row_id, "pid") == std::to_string(handed.pid));
        CHECK(fx.column(handed.row_id, "(cpu_user_s >= 0 AND cpu_system_s >= 0)") == "true");

        const auto left = sup.launch(fx.request({"true"}));
        REQUIRE(until_finished(sup, left.row_id));
        late = left.row_id;
        CHECK(fx.column(late, "status") == "queued");
    }
    CHECK(fx.column(late, "status") == "exited");

    options.exit_write_delay = 20ms;
    Supervisor sup(*fx.conn, options);
    const auto timed = sup.launch(fx.request({"sh", "-c", "exit 7"}));
    // The supervisor's timer wakes the owner's loop when the exit is due.
    std::set<std::string> finished;
    REQUIRE(run_events_until(sup, [&] { return fx.column(timed.row_id, "status") == "exited"; }, finished));
    CHECK(fx.column(timed.row_id, "exit_code") == "7");
}


TEST_CASE("a launch writes its predecessor's exit by key - even with a plan cached while the table was young",
          "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.exit_write_delay = 1h;
    options.heartbeat_interval = 1h;
    Supervisor sup(*fx.conn, options);
    // Hooks one after another, each launch carrying one exit, until the server
    // has cached the statement's generic plan (after five runs) on a table of a
    // few rows that was never analysed.
    std::vector<std::string> rows;
    auto run_one = [&] {
        const auto launched = sup.launch(fx.request({"true"}));
        REQUIRE(launched.started());
        REQUIRE(until_finished(sup, launched.row_id));
        rows.push_back(launched.row_id);
    };
    for (int i = 0; i < 10; ++i) {
        run_one();
    }
    // The table grows to thousands of rows, still without statistics.
    pqxx::nontransaction(*fx.conn)
        .exec_params0("INSERT INTO process (machine_id, process_type, status, ended_at) "
                      "SELECT $1, 'hook', 'exited', now() FROM generate_series(1, 5000)",
                      fx.machine.id);
    const auto scans = seq_scans(*fx.conn, "process");
    for (int i = 0; i < 5; ++i) {
        run_one();
    }
    // The JSON form's cached plan hashed a sequential scan of the table here, once per launch.
    CHECK(seq_scans(*fx.conn, "process") == scans);
    sup.write_held_exits();
    for (const auto& row : rows) {
        CHECK(fx.column(row, "status") == "exited");
        CHECK(fx.column(row, "exit_code") == "0");
        CHECK_FALSE(fx.column(row, "start_ticks").empty());
    }
}

TEST_CASE("a launch carries the exit of a hook already recorded running - keeping its identity", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.exit_write_delay = 1h;
    Supervisor sup(*fx.conn, options);
    // Longer than the deferred running write (k_write_behind_window): the row is
    // running, with its identity, when the exit is held; the exit then carries no identity.
    const auto slow = sup.launch(fx.request({"sh", "-c", "sleep 1.5; exit 5"}));
    REQUIRE(slow.started());
    std::set<std::string> finished;
    REQUIRE(run_events_until(sup, [&] { return fx.column(slow.row_id, "status") == "running"; }, finished));
    const auto started_at = fx.column(slow.row_id, "started_at");
    REQUIRE(run_events_until(sup, [&] { return finished.count(slow.row_id) == 1; }, finished));
    CHECK(fx.column(slow.row_id, "status") == "running");

    const auto next = sup.launch(fx.request({"sleep", "5"}));
    REQUIRE(next.started());
    CHECK(fx.column(slow.row_id, "status") == "exited");
    CHECK(fx.column(slow.row_id, "exit_code") == "5");
    CHECK(fx.column(slow.row_id, "pid") == std::to_string(slow.pid));
    CHECK(fx.column(slow.row_id, "started_at") == started_at);
    CHECK(fx.column(slow.row_id, "(started_at < ended_at)") == "true");
    CHECK(fx.column(slow.row_id, "xmin::text") == fx.column(next.row_id, "xmin::text"));
    sup.teardown({next.row_id}, 2s);
}

TEST_CASE("a launch carries every exit held since the last write", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(false);
    options.exit_write_delay = 1h;
    Supervisor sup(*fx.conn, options);
    const auto a = sup.launch(fx.request({"sh", "-c", "exit 3"}));
    const auto b = sup.launch(fx.request({"sh", "-c", "kill -TERM $$"}));
    REQUIRE(a.started());
    REQUIRE(b.started());
    REQUIRE(until_finished(sup, {a.row_id, b.row_id}));
    CHECK(fx.column(a.row_id, "status") == "queued");
    CHECK(fx.column(b.row_id, "status") == "queued");

    const auto next = sup.launch(fx.request({"sleep", "5"}));
    REQUIRE(next.started());
    CHECK(fx.column(a.row_id, "exit_code") == "3");
    CHECK(fx.column(b.row_id, "term_signal") == std::to_string(SIGTERM));
    for (const auto& row : {a.row_id, b.row_id}) {
        CHECK(fx.column(row, "status") == "exited");
        CHECK(fx.column(row, "xmin::text") == fx.column(next.row_id, "xmin::text"));
        CHECK(fx.column(row, "pid").size() > 0);
        CHECK(fx.column(row, "(cpu_user_s >= 0 AND cpu_system_s >= 0)") == "true");
    }
    sup.teardown({next.row_id}, 2s);
}

TEST_CASE("an argv that is not UTF-8 is recorded - and the held exit its insert carries is written", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(GENERATE(false, true));
    options.exit_write_delay = 1h; // nothing but the next statement writes it
    Supervisor sup(*fx.conn, options);
    const auto first = sup.launch(fx.request({"sh", "-c", "exit 4"}));
    REQUIRE(until_finished(sup, first.row_id));
    CHECK(fx.column(first.row_id, "status") == "queued");

    const auto next = sup.launch(fx.request({"sh", "-c", "exit 0", "caf\xe9"}));
    REQUIRE(next.started());
    CHECK(fx.column(first.row_id, "status") == "exited");
    CHECK(fx.column(first.row_id, "exit_code") == "4");
    CHECK(fx.column(next.row_id, "(cmd->>3)") == "caf\xef\xbf\xbd"); // U+FFFD for the stray byte
    sup.teardown({next.row_id}, 2s);
}

TEST_CASE("held exits survive a launch whose insert fails", "[supervisor]")
{
    SupervisionFixture fx;
    auto options = fx.options(GENERATE(false, true));
    options.exit_write_delay = 1h;
    Supervisor sup(*fx.conn, options);
    const auto first = sup.launch(fx.request({"sh", "-c", "exit 4"}));
    REQUIRE(until_finished(sup, first.row_id));

    // jsonb rejects \u0000: the insert (and the held exit it carries) fails.
    CHECK_THROWS(sup.launch(fx.request({"sh", "-c", "exit 0", std::string("a\0b", 3)})));
    CHECK(fx.column(first.row_id, "status") == "queued");
    sup.write_held_exits();
    CHECK(fx.column(first.row_id, "status") == "exited");
    CHECK(fx.column(first.row_id, "exit_code") == "4");
    CHECK(fx.column(first.row_id, "end_reason") == "exited");
}
