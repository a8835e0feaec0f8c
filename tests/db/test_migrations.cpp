#include "common/base/errors.hpp"
#include "common/db/migrate.hpp"
#include "common/db/migrations_table.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

using namespace orch;
using namespace orch::test;

TEST_CASE("migrations take an empty database to the latest version", "[migrations]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    REQUIRE(schema_version(*conn) == 0);
    auto report = apply_migrations(*conn);
    CHECK(report.from_version == 0);
    CHECK(report.to_version == latest_known_version());
    CHECK(report.applied.size() == embedded_migrations().size());
    CHECK(schema_version(*conn) == latest_known_version());
    pqxx::read_transaction tx(*conn);
    for (const char* table : {"machine", "process", "crawl", "snapshot", "archive_result", "crawl_schedule"}) {
        INFO(table);
        CHECK(tx.exec_params1("SELECT to_regclass($1) IS NOT NULL", table)[0].as<bool>());
    }
}

TEST_CASE("applying migrations twice is a no-op the second time", "[migrations]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    apply_migrations(*conn);
    auto second = apply_migrations(*conn);
    CHECK(second.applied.empty());
    CHECK(second.from_version == latest_known_version());
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT count(*) FROM schema_migrations")[0].as<std::size_t>() == embedded_migrations().size());
}

TEST_CASE("a current database is recognised without the migration lock - one that is not still waits for it",
          "[migrations]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    apply_migrations(*conn);
    // Another session holds the lock (a migration in progress elsewhere), and
    // waiting for it would fail at once.
    auto holder = db.connect();
    pqxx::nontransaction(*holder).exec1("SELECT pg_advisory_lock(x'6f72636832303236'::bigint)");
    pqxx::nontransaction(*conn).exec0("SET lock_timeout = '200ms'");
    const auto report = apply_migrations(*conn);
    CHECK(report.applied.empty());
    CHECK(report.from_version == latest_known_version());
    CHECK(report.to_version == latest_known_version());

    // A digest to record is a write: that takes the lock, and waits for it.
    pqxx::nontransaction(*conn).exec_params0("UPDATE schema_migrations SET checksum = NULL WHERE version = $1",
                                             latest_known_version());
    CHECK_THROWS_AS(apply_migrations(*conn), pqxx::sql_error);
    pqxx::nontransaction(*holder).exec1("SELECT pg_advisory_unlock_all()");
    CHECK(apply_migrations(*conn).checksums_recorded == 1);
}

TEST_CASE("two processes migrating at once: one applies - the other waits and finds nothing to do", "[migrations]")
{
    ScratchDatabase db(false);
    auto orchestrator = bin_path("orchestrator").string();
    // Two real processes started together; each runs `orchestrator migrate`.
    std::vector<CommandResult> results(2);
    std::vector<std::string> outs(2);
    pid_t pids[2];
    int pipes[2][2];
    for (int i = 0; i < 2; ++i) {
        REQUIRE(::pipe(pipes[i]) == 0);
        pids[i] = ::fork();
        REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) {
            ::close(pipes[i][0]);
            auto r = run_command({orchestrator, "migrate", "--database-url", db.url()});
            std::string msg = std::to_string(r.exit_code) + "\n" + r.out;
            (void)!::write(pipes[i][1], msg.data(), msg.size());
            ::_exit(0);
        }
        ::close(pipes[i][1]);
    }
    for (int i = 0; i < 2; ++i) {
        char buf[4096];
        ssize_t n;
        while ((n = ::read(pipes[i][0], buf, sizeof buf)) > 0) {
            outs[i].append(buf, static_cast<std::size_t>(n));
        }
        ::close(pipes[i][0]);
        int status = 0;
        ::waitpid(pids[i], &status, 0);
    }
    for (const auto& o : outs) {
        INFO(o);
        CHECK(o.rfind("0\n", 0) == 0);
    }
    int applied = 0;
    int up_to_date = 0;
    for (const auto& o : outs) {
        applied += o.find("migrated schema") != std::string::npos;
        up_to_date += o.find("up to date") != std::string::npos;
    }
    CHECK(applied == 1);
    CHECK(up_to_date == 1);
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT count(*) FROM schema_migrations")[0].as<std::size_t>() == embedded_migrations().size());
}

TEST_CASE("a database newer than the binary is refused with a clear message", "[migrations]")
{
    ScratchDatabase db;
    {
        auto conn = db.connect();
        pqxx::work tx(*conn);
        tx.exec_params0("INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')",
                        latest_known_version() + 1);
        tx.commit();
    }
    auto conn = db.connect();
    CHECK_THROWS_AS(apply_migrations(*conn), SchemaMismatch);
    CHECK_THROWS_WITH(require_current_schema(*conn), Catch::Contains("newer than this binary"));

    // Every executable refuses at start with the documented code (5).
    auto id = "00000000-0000-4000-8000-000000000000";
    for (auto [exe, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"orchestrator", {"migrate"}},
             {"orchestrator", {"add", "http://example.com/"}},
             {"crawl_worker", {"--crawl-id", id}},
             {"snapshot_worker", {"--snapshot-id", id}}}) {
        std::vector<std::string> argv{bin_path(exe).string()};
        argv.insert(argv.end(), args.begin(), args.end());
        ScratchDir data("orch-mig-");
        argv.insert(argv.end(), {"--database-url", db.url(), "--data-dir", data.path().string()});
        auto r = run_command(argv);
        INFO(exe << ": " << r.err);
        CHECK(r.exit_code == 5);
        CHECK(r.err.find("newer than this binary") != std::string::npos);
    }
}

TEST_CASE("workers refuse a database that was never migrated", "[migrations]")
{
    ScratchDatabase db(false);
    ScratchDir data("orch-mig-");
    auto r = run_command({bin_path("crawl_worker").string(), "--crawl-id", "00000000-0000-4000-8000-000000000000",
                          "--database-url", db.url(), "--data-dir", data.path().string()});
    CHECK(r.exit_code == 5);
    CHECK(r.err.find("orchestrator migrate") != std::string::npos);
}

TEST_CASE("each applied migration's digest is kept - a changed one is refused until an operator clears it",
          "[migrations]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    apply_migrations(*conn);
    {
        // The digest the build computed is that of the SQL the binary carries and applied.
        pqxx::read_transaction tx(*conn);
        for (const auto& m : embedded_migrations()) {
            INFO(m.name);
            auto row = tx.exec_params1("SELECT checksum, encode(sha256(convert_to($2, 'UTF8')), 'hex') "
                                       "FROM schema_migrations WHERE version = $1",
                                       m.version, std::string(m.sql));
            CHECK(row[0].as<std::string>() == m.sha256);
            CHECK(row[1].as<std::string>() == m.sha256);
        }
    }
    const std::string victim = embedded_migrations().at(2).name;
    {
        pqxx::work tx(*conn);
        tx.exec0("UPDATE schema_migrations SET checksum = repeat('ab', 32) WHERE version = 3");
        tx.commit();
    }
    CHECK_THROWS_AS(apply_migrations(*conn), SchemaMismatch);
    CHECK_THROWS_WITH(apply_migrations(*conn), Catch::Contains(victim + " was changed after it was applied") &&
                                                   Catch::Contains("WHERE version = 3"));
    // The command says the same and exits with the schema-mismatch code.
    ScratchDir data("orch-mig-");
    auto r = run_command({bin_path("orchestrator").string(), "migrate", "--database-url", db.url(), "--data-dir",
                          data.path().string()});
    INFO(r.err);
    CHECK(r.exit_code == 5);
    CHECK(r.err.find(victim + " was changed after it was applied") != std::string::npos);
    // A migration applied under another name is refused too.
    {
        pqxx::work tx(*conn);
        tx.exec0("UPDATE schema_migrations SET checksum = NULL, name = '0003_something_else' WHERE version = 3");
        tx.commit();
    }
    CHECK_THROWS_WITH(apply_migrations(*conn), Catch::Contains("version 3 was applied as 0003_something_else"));
    // The way out the message names: a cleared digest is recorded again.
    {
        pqxx::work tx(*conn);
        tx.exec_params0("UPDATE schema_migrations SET name = $1 WHERE version = 3", victim);
        tx.commit();
    }
    auto report = apply_migrations(*conn);
    CHECK(report.checksums_recorded == 1);
    CHECK(report.applied.empty());
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT checksum FROM schema_migrations WHERE version = 3")[0].as<std::string>() ==
          embedded_migrations().at(2).sha256);
}

TEST_CASE("a database migrated before digests were kept gets them at the next migrate", "[migrations]")
{
    ScratchDatabase db(false);
    auto conn = db.connect();
    apply_migrations(*conn);
    {
        pqxx::work tx(*conn);
        tx.exec0("ALTER TABLE schema_migrations DROP COLUMN checksum");
        tx.commit();
    }
    auto report = apply_migrations(*conn);
    CHECK(report.applied.empty());
    CHECK(report.checksums_recorded == static_cast<int>(embedded_migrations().size()));
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT count(*) FROM schema_migrations WHERE checksum IS NOT NULL")[0].as<std::size_t>() ==
          embedded_migrations().size());
}

TEST_CASE("migrate --status lists each migration's state without applying anything - exit 5 when migrate would "
          "refuse",
          "[migrations]")
{
    ScratchDatabase db(false);
    ScratchDir data("orch-mig-");
    auto status = [&](bool json = false) {
        std::vector<std::string> argv{bin_path("orchestrator").string(), "migrate", "--status", "--database-url",
                                      db.url(), "--data-dir", data.path().string()};
        if (json) {
            argv.push_back("--json");
        }
        return run_command(argv);
    };
    const auto total = embedded_migrations().size();
    // Never migrated: everything pending, and still nothing applied afterwards.
    auto fresh = status();
    INFO(fresh.out << fresh.err);
    CHECK(fresh.exit_code == 0);
    CHECK(fresh.out.find(fmt::format("0 applied, {} pending: run `orchestrator migrate`", total)) !=
          std::string::npos);
    auto conn = db.connect();
    CHECK(schema_version(*conn) == 0);

    apply_migrations(*conn);
    {
        // An older binary's database (no digests), a changed file, a version from the future.
        pqxx::work tx(*conn);
        tx.exec0("ALTER TABLE schema_migrations DROP COLUMN checksum");
        tx.commit();
    }
    auto old = status();
    INFO(old.out << old.err);
    CHECK(old.exit_code == 0);
    CHECK(old.out.find("applied, no digest yet") != std::string::npos);
    CHECK(old.out.find(fmt::format("{} applied, 0 pending", total)) != std::string::npos);
    {
        pqxx::read_transaction tx(*conn);
        // Read only: the column is still missing.
        CHECK(tx.exec1("SELECT count(*) FROM pg_attribute WHERE attrelid = 'schema_migrations'::regclass "
                       "AND attname = 'checksum' AND NOT attisdropped")[0].as<int>() == 0);
    }
    apply_migrations(*conn);
    {
        pqxx::work tx(*conn);
        tx.exec0("UPDATE schema_migrations SET checksum = repeat('cd', 32) WHERE version = 2");
        tx.exec_params0("INSERT INTO schema_migrations (version, name) VALUES ($1, '9999_from_the_future')",
                        latest_known_version() + 1);
        tx.commit();
    }
    auto bad = status();
    INFO(bad.out << bad.err);
    CHECK(bad.exit_code == 5);
    CHECK(bad.out.find("CHANGED since applied (applied cdcdcdcdcdcd)") != std::string::npos);
    CHECK(bad.out.find("9999_from_the_future") != std::string::npos);
    CHECK(bad.out.find("UNKNOWN to this binary") != std::string::npos);
    CHECK(bad.err.find(std::string(embedded_migrations().at(1).name) + ", 9999_from_the_future") !=
          std::string::npos);
    auto as_json = status(true);
    CHECK(as_json.exit_code == 5);
    std::istringstream lines(as_json.out);
    std::size_t count = 0;
    int refused_rows = 0;
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line);
        ++count;
        refused_rows += j.at("refused").get<bool>();
        if (j.at("version") == 2) {
            CHECK(j.at("state") == "CHANGED since applied");
            std::string recorded;
            for (int i = 0; i < 32; ++i) {
                recorded += "cd";
            }
            CHECK(j.at("recorded_sha256") == recorded);
            CHECK(j.at("sha256") == embedded_migrations().at(1).sha256);
        }
    }
    CHECK(count == total + 1);
    CHECK(refused_rows == 2);
}

TEST_CASE("a migration whose comments were reworded is accepted by its earlier digest - and only by it",
          "[migrations]")
{
    // migrations/reworded.txt lists the earlier digests; 0003 is one of them.
    const auto& m = embedded_migrations().at(2);
    REQUIRE(m.version == 3);
    const std::string earlier = m.reworded_from;
    REQUIRE(earlier.size() >= 64);
    const std::string first_earlier = earlier.substr(0, 64);
    REQUIRE(first_earlier != m.sha256);

    ScratchDatabase db(false);
    auto conn = db.connect();
    apply_migrations(*conn);
    auto set_digest = [&](const std::string& digest) {
        pqxx::work tx(*conn);
        tx.exec_params0("UPDATE schema_migrations SET checksum = $1 WHERE version = 3", digest);
        tx.commit();
    };
    auto recorded = [&] {
        pqxx::read_transaction tx(*conn);
        return tx.exec1("SELECT checksum FROM schema_migrations WHERE version = 3")[0].as<std::string>();
    };

    // A database that applied the earlier wording: status says so, migrate
    // accepts it and records the current digest in its place.
    set_digest(first_earlier);
    auto status = migration_status(*conn);
    REQUIRE(status.size() >= 3);
    CHECK(status.at(2).kind == MigrationState::Kind::reworded);
    CHECK_FALSE(refused(status.at(2).kind));
    auto report = apply_migrations(*conn);
    CHECK(report.checksums_recorded == 1);
    CHECK(report.applied.empty());
    CHECK(recorded() == m.sha256);

    // Another file's earlier digest is no reason to accept this one.
    const std::string other_earlier = std::string(embedded_migrations().at(3).reworded_from).substr(0, 64);
    REQUIRE(other_earlier.size() == 64);
    set_digest(other_earlier);
    CHECK_THROWS_WITH(apply_migrations(*conn),
                      Catch::Contains(std::string(m.name) + " was changed after it was applied"));
    // Nor is a prefix of an earlier digest.
    set_digest(first_earlier.substr(0, 32));
    CHECK_THROWS_AS(apply_migrations(*conn), SchemaMismatch);
}
