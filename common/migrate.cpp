#include "common/migrate.hpp"

#include "common/errors.hpp"
#include "common/log.hpp"
#include "common/migrations_table.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

// Arbitrary but fixed: the advisory lock key that serialises migrations of one database.
constexpr long long k_migration_lock_key = 0x6f72636832303236LL; // "orch2026"

int read_version(pqxx::transaction_base& tx)
{
    auto exists = tx.exec1("SELECT to_regclass('schema_migrations') IS NOT NULL");
    if (!exists[0].as<bool>()) {
        return 0;
    }
    return tx.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].as<int>();
}

std::string newer_message(int db_version)
{
    return fmt::format("the database schema is at version {}, newer than this binary understands (version {}); "
                       "upgrade the orchestrator binaries",
                       db_version, latest_known_version());
}

} // namespace

int latest_known_version()
{
    const auto& all = embedded_migrations();
    return all.empty() ? 0 : all.back().version;
}

MigrationReport apply_migrations(pqxx::connection& conn)
{
    pqxx::work tx(conn);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", k_migration_lock_key);
    tx.exec0("CREATE TABLE IF NOT EXISTS schema_migrations ("
             " version integer PRIMARY KEY,"
             " name text NOT NULL,"
             " applied_at timestamptz NOT NULL DEFAULT now())");
    MigrationReport report;
    report.from_version = read_version(tx);
    if (report.from_version > latest_known_version()) {
        throw SchemaMismatch(newer_message(report.from_version));
    }
    for (const auto& m : embedded_migrations()) {
        if (m.version <= report.from_version) {
            continue;
        }
        tx.exec0(m.sql);
        tx.exec_params0("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name);
        report.applied.emplace_back(m.name);
    }
    tx.commit();
    report.to_version = report.applied.empty() ? report.from_version : latest_known_version();
    for (const auto& name : report.applied) {
        log::info("applied migration", {{"migration", name}});
    }
    return report;
}

int schema_version(pqxx::connection& conn)
{
    // Read-only and checked at every worker start: autocommit spares BEGIN/ROLLBACK.
    pqxx::nontransaction tx(conn);
    return read_version(tx);
}

void require_current_schema(pqxx::connection& conn)
{
    int version = schema_version(conn);
    if (version > latest_known_version()) {
        throw SchemaMismatch(newer_message(version));
    }
    if (version < latest_known_version()) {
        throw SchemaMismatch(fmt::format("the database schema is at version {}, this binary needs version {}; "
                                         "run `orchestrator migrate`",
                                         version, latest_known_version()));
    }
}

} // namespace orch
