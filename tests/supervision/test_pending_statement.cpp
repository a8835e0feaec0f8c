#include "common/db/pending_statement.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using namespace orch::test;

namespace {

long long count_rows(pqxx::connection& conn)
{
    pqxx::nontransaction tx(conn);
    return tx.exec("SELECT count(*) FROM pending_probe")[0][0].as<long long>();
}

const std::string k_insert = "INSERT INTO pending_probe (n, label) VALUES ($1, $2)";

} // namespace

TEST_CASE("a pending statement commits while the caller works - errors surface at finish - the connection stays "
          "usable",
          "[pending_statement]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    pqxx::nontransaction(*conn).exec("CREATE TABLE pending_probe (n integer PRIMARY KEY, label text)");

    // Sent, then finished: the row is there, NULL parameters are NULL.
    auto first = send_autocommit(*conn, "probe.insert", k_insert, 1, static_cast<const char*>(nullptr));
    first.finish();
    first.finish(); // idempotent
    CHECK(count_rows(*conn) == 1);
    CHECK(pqxx::nontransaction(*conn).exec("SELECT label IS NULL FROM pending_probe")[0][0].as<bool>());

    // A failing statement (duplicate key) throws at finish, not at the send;
    // libpqxx can use the connection afterwards.
    auto duplicate = send_autocommit(*conn, "probe.insert", k_insert, 1, std::string("again"));
    CHECK_THROWS_AS(duplicate.finish(), pqxx::sql_error);
    CHECK(count_rows(*conn) == 1);

    // Never finished: the destructor drains it, the statement still ran.
    {
        auto dropped = send_autocommit(*conn, "probe.insert", k_insert, 2, std::string("two"));
    }
    CHECK(count_rows(*conn) == 2);

    // A moved-from statement owns nothing: only the new owner drains.
    {
        auto original = send_autocommit(*conn, "probe.insert", k_insert, 3, std::string("three"));
        PendingStatement moved(std::move(original));
        moved.finish();
    }
    CHECK(count_rows(*conn) == 3);
}

TEST_CASE("a pending statement on a killed session is a broken connection", "[pending_statement]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    pqxx::nontransaction(*conn).exec("CREATE TABLE pending_probe (n integer PRIMARY KEY, label text)");
    auto admin = db.connect();
    const int backend = conn->backendpid();
    pqxx::nontransaction(*admin).exec_params("SELECT pg_terminate_backend($1)", backend);
    bool broken = false;
    try {
        send_autocommit(*conn, "probe.insert", k_insert, 1, std::string("x")).finish();
    } catch (const pqxx::broken_connection&) {
        broken = true;
    }
    CHECK(broken);
    CHECK(count_rows(*admin) == 0);
}
