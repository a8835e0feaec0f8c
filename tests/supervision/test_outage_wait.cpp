// common/db/database_outage.hpp against a real server: the outage is the scratch
// database refusing connections (ALLOW_CONNECTIONS false) with our backend
// terminated, which breaks the connection and every reconnect until healed,
// and touches no other test's database.
#include "common/db/autocommit_statement.hpp"
#include "common/db/database.hpp"
#include "common/base/errors.hpp"
#include "common/db/database_outage.hpp"
#include "tests/supervision/supervision_fixture.hpp"

#include "common/supervision/file_tail.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <map>
#include <thread>
#include <utility>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Cuts the scratch database off and heals it, from a connection to another database.
class Outage {
public:
    explicit Outage(const ScratchDatabase& db) : m_name(db.name()), m_admin(base_database_url()) {}
    ~Outage()
    {
        try {
            heal();
        } catch (const std::exception&) {
        }
    }
    Outage(const Outage&) = delete;
    Outage& operator=(const Outage&) = delete;

    void cut()
    {
        pqxx::nontransaction tx(m_admin);
        tx.exec0("ALTER DATABASE " + tx.quote_name(m_name) + " ALLOW_CONNECTIONS false");
        tx.exec_params("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", m_name);
    }
    void heal()
    {
        pqxx::nontransaction tx(m_admin);
        tx.exec0("ALTER DATABASE " + tx.quote_name(m_name) + " ALLOW_CONNECTIONS true");
    }

private:
    std::string m_name;
    pqxx::connection m_admin;
};

// The policy for one test case; the default (zero grace) again afterwards.
struct PolicyScope {
    explicit PolicyScope(OutagePolicy policy) { set_outage_policy(std::move(policy)); }
    ~PolicyScope() { set_outage_policy({}); }
    PolicyScope(const PolicyScope&) = delete;
    PolicyScope& operator=(const PolicyScope&) = delete;
};

int select_one(pqxx::connection& conn)
{
    return exec_autocommit(conn, "outage_test.one", "SELECT 1")[0][0].as<int>();
}

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

} // namespace

TEST_CASE("outage: a lost connection is waited for and the statement retried on the same connection", "[outage]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    Outage outage(db);
    std::chrono::milliseconds reported{-1};
    std::string reported_error;
    PolicyScope policy({10s, -1, {}, [&](std::chrono::milliseconds down, const std::string& error) {
                            reported = down;
                            reported_error = error;
                        }});
    REQUIRE(select_one(*conn) == 1); // prepared before the outage, prepared again after it
    const auto before = last_reconnect();

    outage.cut();
    std::thread healer([&] {
        std::this_thread::sleep_for(600ms);
        outage.heal();
    });
    const auto t0 = Clock::now();
    int value = 0;
    CHECK_NOTHROW(value = select_one(*conn));
    const double waited = seconds_since(t0);
    healer.join();
    CHECK(value == 1);
    CHECK(waited >= 0.5);
    CHECK(waited < 5.0);
    REQUIRE(last_reconnect().has_value());
    CHECK(last_reconnect() != before);
    // Told once it was back, with how long it was gone and why.
    CHECK(reported >= 500ms);
    CHECK(reported.count() <= static_cast<long>(waited * 1000) + 1);
    CHECK(!reported_error.empty());
}

TEST_CASE("outage: past the grace - with a stop pending or taken - or with no grace the loss propagates", "[outage]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    Outage outage(db);
    // The policy's while_waiting runs before each reconnect attempt of a wait
    // for the server (50 ms, then doubling): how many times the code waited,
    // whatever the machine's speed. One look at the server, or none, is no wait.
    int waits = 0;
    const auto count_waits = [&] { ++waits; };

    SECTION("past the grace: once waited, then at once until the server is back")
    {
        PolicyScope policy({700ms, -1, count_waits, {}});
        outage.cut();
        auto t0 = Clock::now();
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(seconds_since(t0) >= 0.6);
        // It waited, and gave up at the grace: attempts 50, 150 and 350 ms in,
        // and one last at 700 ms; a wait past the grace would try again at 750 ms.
        CHECK(waits >= 1);
        CHECK(waits <= 4);
        // A caller that swallowed the loss does not pay another grace: one look.
        const int waited_before = waits;
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(waits == waited_before);
        outage.heal();
        CHECK(select_one(*conn) == 1);
    }
    SECTION("a stop signal pending")
    {
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        REQUIRE(::write(fds[1], "x", 1) == 1); // readable: what a pending signal looks like on a signalfd
        PolicyScope policy({10s, fds[0], count_waits, {}});
        outage.cut();
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(waits == 0);
        // A supervisor's teardown on the way out takes the stop: what it still
        // writes gets one look, not the grace its parent's deadline would cut short.
        char taken = 0;
        REQUIRE(::read(fds[0], &taken, 1) == 1);
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(waits == 0);
        outage.heal();
        CHECK(select_one(*conn) == 1);
        ::close(fds[0]);
        ::close(fds[1]);
    }
    SECTION("stopping (a stop its loop took): one look, not the grace")
    {
        OutagePolicy stopping{10s, -1, count_waits, {}, [] { return true; }};
        PolicyScope policy(std::move(stopping));
        outage.cut();
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(waits == 0);
        // The look finds a server that is back.
        outage.heal();
        CHECK(select_one(*conn) == 1);
    }
    SECTION("no grace (the default, and DB_OUTAGE_GRACE=0)")
    {
        CHECK(outage_policy().grace == 0ms);
        outage.cut();
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        outage.heal();
        conn = db.connect();
        PolicyScope policy({0ms, -1, count_waits, {}}); // the same, seen waiting not once
        outage.cut();
        CHECK_THROWS_AS(select_one(*conn), pqxx::broken_connection);
        CHECK(waits == 0);
    }
}

TEST_CASE("outage: a refused first connection is waited for under a policy - refused at once without one",
          "[outage]")
{
    ScratchDatabase db;
    Outage outage(db);
    int waits = 0;
    const auto count_waits = [&] { ++waits; };
    outage.cut();
    CHECK(outage_policy().grace == 0ms);
    CHECK_THROWS_AS(open_connection(db.url()), DatabaseUnavailable); // a worker run by hand: no policy
    {
        PolicyScope zero({0ms, -1, count_waits, {}}); // the same, seen waiting not once
        CHECK_THROWS_AS(open_connection(db.url()), DatabaseUnavailable);
        CHECK(waits == 0);
    }

    PolicyScope policy({10s, -1, count_waits, {}}); // a worker a supervisor started
    std::thread healer([&] {
        std::this_thread::sleep_for(600ms);
        outage.heal();
    });
    const auto t0 = Clock::now();
    std::unique_ptr<pqxx::connection> conn;
    CHECK_NOTHROW(conn = open_connection(db.url()));
    const double waited = seconds_since(t0);
    healer.join();
    REQUIRE(conn);
    CHECK(select_one(*conn) == 1);
    CHECK(waits >= 1); // what the refusals above would have shown, had they waited
    CHECK(waited >= 0.5);
    CHECK(waited < 5.0);
}

TEST_CASE("outage: a teardown keeps its deadlines - the exits it could not write are written once the database is back",
          "[outage]")
{
    SupervisionFixture fx;
    Outage outage(fx.db);
    PolicyScope policy({30s, -1, {}, {}});
    Supervisor sup(*fx.conn, fx.options(false));
    const auto deaf = sup.launch(fx.request({"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, "deaf"));
    const auto log = fx.dir / "logs" / ("deaf." + deaf.row_id + ".stdout.log");
    REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));
    REQUIRE(eventually([&] { sup.process_events(); return fx.column(deaf.row_id, "status") == "running"; }));

    outage.cut();
    const auto t0 = Clock::now();
    const auto outcomes = sup.teardown({}, 500ms);
    const double took = seconds_since(t0);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].killed);
    CHECK(took < 3.0); // the grace is 30 s: the teardown did not wait for the database
    CHECK(!pid_alive(deaf.pid));

    outage.heal();
    sup.write_held_exits(); // rides the rest of the outage out: reconnects, then writes
    CHECK(fx.column(deaf.row_id, "status") == "exited");
    CHECK(fx.column(deaf.row_id, "end_reason") == "killed_on_teardown");
}

TEST_CASE("outage: hook timeouts keep their time while the owner waits for the database - SIGTERM then SIGKILL",
          "[outage]")
{
    SupervisionFixture fx;
    Outage outage(fx.db);
    PolicyScope policy({30s, -1, {}, {}});
    auto options = fx.options(false);
    options.teardown_grace = 1s;
    Supervisor sup(*fx.conn, options);
    auto polite_request = fx.request({"sh", "-c", "echo ready; exec sleep 60"}, "polite");
    polite_request.timeout_s = 1.0;
    auto deaf_request = fx.request({"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, "deaf");
    deaf_request.timeout_s = 1.0;
    const auto polite = sup.launch(polite_request);
    const auto deaf = sup.launch(deaf_request);
    for (const auto& [name, launched] : {std::pair{"polite", polite}, std::pair{"deaf", deaf}}) {
        const auto log = fx.dir / "logs" / (std::string(name) + "." + launched.row_id + ".stdout.log");
        REQUIRE(eventually([&] { return read_file_tail(log).find("ready") != std::string::npos; }));
    }

    // The owner is blocked in a statement for the whole outage, past both
    // timeouts (1 s) and the deaf one's grace (1 s more): nothing calls wait().
    outage.cut();
    bool polite_alive = true;
    bool deaf_alive = true;
    std::thread healer([&] {
        std::this_thread::sleep_for(3500ms);
        polite_alive = pid_alive(polite.pid); // a zombie, not reaped yet, is not alive
        deaf_alive = pid_alive(deaf.pid);
        outage.heal();
    });
    const auto t0 = Clock::now();
    CHECK_NOTHROW(select_one(*fx.conn));
    const double blocked = seconds_since(t0);
    healer.join();
    CHECK(blocked >= 3.0);
    CHECK(!polite_alive); // its SIGTERM came on time
    CHECK(!deaf_alive);   // and the SIGKILL after the grace

    // The owner's loop after the outage finds them ended, as timeouts.
    std::map<std::string, ProcessOutcome> ends;
    REQUIRE(eventually([&] {
        sup.process_events();
        for (auto& outcome : sup.take_finished()) {
            ends[outcome.row_id] = outcome;
        }
        return ends.size() == 2;
    }));
    const auto& polite_end = ends.at(polite.row_id);
    CHECK(polite_end.timed_out);
    CHECK(!polite_end.killed);
    CHECK(polite_end.term_signal == SIGTERM);
    const auto& deaf_end = ends.at(deaf.row_id);
    CHECK(deaf_end.timed_out);
    CHECK(deaf_end.killed);
    CHECK(deaf_end.term_signal == SIGKILL);
    sup.write_held_exits();
    CHECK(fx.column(polite.row_id, "end_reason") == "timed_out");
    CHECK(fx.column(deaf.row_id, "end_reason") == "timed_out");
    CHECK(fx.column(deaf.row_id, "status") == "exited");
}
