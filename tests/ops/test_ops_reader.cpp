#include "tests/ops/ops_fixture.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>
#include <unistd.h>

using namespace orch::test;

namespace {

// Roles are cluster-wide: a name per test process, dropped after the scratch
// database (whose grants and default privileges die with it).
struct RoleName {
    std::string name = fmt::format("ops_reader_t{}", ::getpid());
    ~RoleName()
    {
        try {
            pqxx::connection admin(base_database_url());
            pqxx::nontransaction tx(admin);
            tx.exec0("DROP ROLE IF EXISTS " + tx.quote_name(name));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warning: could not drop role %s: %s\n", name.c_str(), e.what());
        }
    }
};

} // namespace

TEST_CASE("ops: the reader role selects every ops view and nothing else - read-only with a timeout", "[ops]")
{
    RoleName role;
    OpsTree tree; // destroyed first
    auto pw = tree.dir() / "pw";
    std::ofstream(pw) << "s3cret\n";
    auto r = tree.run({"ops", "create-reader-role", "--role-name", role.name, "--password-file", pw.string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("created role " + role.name) != std::string::npos);
    auto again = tree.run({"ops", "create-reader-role", "--role-name", role.name});
    REQUIRE(again.exit_code == 0);
    CHECK(again.out.find("updated role " + role.name) != std::string::npos);
    CHECK(tree.run({"ops", "create-reader-role", "--role-name", "Bad;Name"}).exit_code == 7);

    pqxx::connection reader(tree.db().url() + " user=" + role.name);
    {
        pqxx::nontransaction tx(reader);
        CHECK(tx.exec1("SHOW default_transaction_read_only")[0].as<std::string>() == "on");
        CHECK(tx.exec1("SHOW statement_timeout")[0].as<std::string>() == "5s");
        auto views = tx.exec("SELECT table_name FROM information_schema.views WHERE table_schema = 'ops' ORDER BY 1");
        CHECK(views.size() == 15);
        for (const auto& v : views) {
            auto name = v[0].as<std::string>();
            INFO(name);
            CHECK_NOTHROW(tx.exec("SELECT * FROM ops." + name));
        }
        CHECK(tx.exec1("SELECT count(*) FROM ops.process_tree")[0].as<int>() == 8);
        // The window function reads the tables with its owner's rights, like the views.
        CHECK(tx.exec1("SELECT count(*) FROM ops.process_tree_since(now() - interval '1 week')")[0].as<int>() == 8);
        CHECK(tx.exec1("SELECT count(*) FROM ops.crawl_progress")[0].as<int>() == 2);
        // url_host(), in the public schema, runs for the reader too.
        CHECK(tx.exec1("SELECT count(*) FROM ops.crawl_hosts")[0].as<int>() == 2);
        // The journal too, which recorded the role's creation and update.
        CHECK(tx.exec1("SELECT count(*) FROM ops.events WHERE kind = 'ops.reader_role'")[0].as<int>() == 2);
    }
    // What happens to `sql`: "allowed", "no privilege" or "read-only"; with `writable`, the
    // session first turns default_transaction_read_only off (a reader may: it is a guardrail).
    auto attempt = [&](const std::string& sql, bool writable = false) {
        pqxx::nontransaction tx(reader);
        if (writable) {
            tx.exec0("SET default_transaction_read_only = off");
        }
        try {
            tx.exec(sql);
            return std::string("allowed");
        } catch (const pqxx::sql_error& e) {
            std::string what = e.what();
            return what.find("permission denied") != std::string::npos ? std::string("no privilege")
                   : what.find("read-only transaction") != std::string::npos ? std::string("read-only")
                                                                              : what;
        }
    };
    CHECK(attempt("SELECT * FROM crawl") == "no privilege");
    CHECK(attempt("SELECT * FROM process") == "no privilege");
    CHECK(attempt("SELECT * FROM schema_migrations") == "no privilege");
    CHECK(attempt("SELECT * FROM event") == "no privilege");
    CHECK(attempt("UPDATE crawl SET label = 'x'") == "read-only");
    CHECK(attempt("UPDATE crawl SET label = 'x'", true) == "no privilege");
    CHECK(attempt("DELETE FROM ops.process_exits", true) != "allowed");
    CHECK(attempt("CREATE TABLE ops.x (i int)", true) == "no privilege");
    CHECK(attempt("CREATE TABLE public.x (i int)", true) == "no privilege");
    CHECK(attempt("SELECT count(*) FROM ops.crawl_progress", true) == "allowed");
}

TEST_CASE("ops: every query of the Grafana dashboard runs as the reader role and returns rows", "[ops][grafana]")
{
    RoleName role;
    OpsTree tree; // destroyed first
    REQUIRE(tree.run({"ops", "create-reader-role", "--role-name", role.name}).exit_code == 0);
    pqxx::connection reader(tree.db().url() + " user=" + role.name);
    // A reaped hook's CPU time, as its supervisor records it (the tree has none).
    tree.exec("UPDATE process SET cpu_user_s = 0.012, cpu_system_s = 0.003 WHERE id = '" + ops_ids::h1 + "'");
    std::ifstream file(source_dir() / "scripts" / "grafana-dashboard.json");
    REQUIRE(file);
    auto dashboard = nlohmann::json::parse(file);
    int queries = 0;
    for (const auto& panel : dashboard.at("panels")) {
        for (const auto& target : panel.value("targets", nlohmann::json::array())) {
            // Grafana's macros as its PostgreSQL data source expands them, over the last week.
            auto sql = target.at("rawSql").get<std::string>();
            sql = std::regex_replace(sql, std::regex(R"(\$__timeFilter\((\w+)\))"),
                                     "$1 BETWEEN now() - interval '7 days' AND now()");
            sql = std::regex_replace(sql, std::regex(R"(\$__timeGroupAlias\((\w+), '1m', 0\))"),
                                     "date_trunc('minute', $1) AS time");
            INFO(panel.at("title").get<std::string>() << ": " << sql);
            CHECK(sql.find('$') == std::string::npos);
            pqxx::read_transaction tx(reader);
            pqxx::result r;
            CHECK_NOTHROW(r = tx.exec(sql));
            // The tree OpsTree made (and the journal of the role's creation) gives every panel rows.
            CHECK_FALSE(r.empty());
            ++queries;
        }
    }
    CHECK(queries == 13);
}
