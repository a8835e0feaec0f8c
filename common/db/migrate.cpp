#include "common/db/migrate.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/db/migrations_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

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

// The digest column came after the table: a database migrated by an older binary
// gets it here, empty (verify_applied fills it in).
void ensure_checksum_column(pqxx::transaction_base& tx)
{
    auto has = tx.exec1("SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'schema_migrations'::regclass "
                        "AND attname = 'checksum' AND NOT attisdropped)");
    if (!has[0].as<bool>()) {
        tx.exec0("ALTER TABLE schema_migrations ADD COLUMN checksum text");
    }
}

// Whether `digest` is one of the space-separated earlier digests of a file.
bool is_earlier_wording(const std::string& reworded_from, const std::string& digest)
{
    std::size_t at = 0;
    while (at < reworded_from.size()) {
        auto end = reworded_from.find(' ', at);
        if (end == std::string::npos) {
            end = reworded_from.size();
        }
        if (reworded_from.compare(at, end - at, digest) == 0 && end > at) {
            return true;
        }
        at = end + 1;
    }
    return false;
}

// Every migration of the database (read in `tx`) and of this binary, by version,
// and how they compare: the one comparison behind migration_status and
// apply_migrations' check.
std::vector<MigrationState> compare_migrations(pqxx::transaction_base& tx)
{
    pqxx::result rows;
    if (tx.exec1("SELECT to_regclass('schema_migrations') IS NOT NULL")[0].as<bool>()) {
        // Through to_jsonb: a database of an older binary has no digest column yet.
        rows = tx.exec("SELECT version, name, to_jsonb(applied_at) #>> '{}', to_jsonb(m) ->> 'checksum' "
                       "FROM schema_migrations m ORDER BY version");
    }
    std::vector<MigrationState> out;
    std::size_t row = 0;
    const auto& mine = embedded_migrations();
    std::size_t next = 0;
    while (row < rows.size() || next < mine.size()) {
        const int db_version = row < rows.size() ? rows[row][0].as<int>() : INT_MAX;
        const int my_version = next < mine.size() ? mine[next].version : INT_MAX;
        MigrationState m;
        std::string reworded_from;
        m.version = std::min(db_version, my_version);
        if (my_version <= db_version) {
            m.name = mine[next].name;
            m.sha256 = mine[next].sha256;
            reworded_from = mine[next].reworded_from;
            ++next;
        }
        if (db_version <= my_version) {
            const auto& r = rows[row++];
            m.applied_at = r[2].as<std::string>();
            m.recorded_sha256 = r[3].is_null() ? "" : r[3].as<std::string>();
            const auto applied_as = r[1].as<std::string>();
            if (m.name.empty()) {
                m.name = applied_as;
                m.kind = MigrationState::Kind::unknown;
            } else if (applied_as != m.name) {
                m.applied_as = applied_as;
                m.kind = MigrationState::Kind::renamed;
            } else if (m.recorded_sha256.empty()) {
                m.kind = MigrationState::Kind::unrecorded;
            } else if (m.recorded_sha256 == m.sha256) {
                m.kind = MigrationState::Kind::applied;
            } else if (is_earlier_wording(reworded_from, m.recorded_sha256)) {
                m.kind = MigrationState::Kind::reworded;
            } else {
                m.kind = MigrationState::Kind::changed;
            }
        }
        out.push_back(std::move(m));
    }
    return out;
}

// Records this binary's digest for each applied migration that has none
// (applied before digests were kept, or cleared by an operator who checked it)
// or the digest of an earlier wording of its comments;
// returns how many. Throws SchemaMismatch naming every applied migration whose
// name or digest differs from this binary's file of that version, or that this
// binary does not have: the database was built from other SQL than this
// binary's, and nothing says which tables, columns or statements that changed.
int verify_applied(pqxx::transaction_base& tx)
{
    int recorded = 0;
    std::vector<std::string> refused_ones;
    int first_refused = 0;
    for (const auto& m : compare_migrations(tx)) {
        switch (m.kind) {
        case MigrationState::Kind::unrecorded:
        case MigrationState::Kind::reworded:
            tx.exec_params0("UPDATE schema_migrations SET checksum = $2 WHERE version = $1", m.version, m.sha256);
            ++recorded;
            continue;
        case MigrationState::Kind::changed:
            refused_ones.push_back(fmt::format("{} was changed after it was applied (applied sha256 {}, this "
                                               "binary's {})",
                                               m.name, m.recorded_sha256.substr(0, 12), m.sha256.substr(0, 12)));
            break;
        case MigrationState::Kind::renamed:
            refused_ones.push_back(
                fmt::format("version {} was applied as {}, this binary has {}", m.version, m.applied_as, m.name));
            break;
        case MigrationState::Kind::unknown:
            refused_ones.push_back(fmt::format("version {} was applied as {}, this binary has no such migration",
                                               m.version, m.name));
            break;
        case MigrationState::Kind::applied:
        case MigrationState::Kind::pending:
            continue;
        }
        if (first_refused == 0) {
            first_refused = m.version;
        }
    }
    if (!refused_ones.empty()) {
        throw SchemaMismatch(fmt::format(
            "the database's applied migrations differ from this binary's: {}. Its schema may not be what this "
            "binary expects. Use binaries built from the migrations that were applied; or, once you have checked "
            "that the database matches this binary's file, clear the recorded digest (UPDATE schema_migrations "
            "SET checksum = NULL WHERE version = {}) and run `orchestrator migrate` to record the new one",
            fmt::join(refused_ones, "; "), first_refused));
    }
    return recorded;
}

std::string newer_message(int db_version)
{
    return fmt::format("the database schema is at version {}, newer than this binary understands (version {}); "
                       "upgrade the orchestrator binaries",
                       db_version, latest_known_version());
}

} // namespace

const char* kind_name(MigrationState::Kind kind)
{
    switch (kind) {
    case MigrationState::Kind::applied: return "applied";
    case MigrationState::Kind::unrecorded: return "applied, no digest yet";
    case MigrationState::Kind::reworded: return "applied, comments reworded since";
    case MigrationState::Kind::changed: return "CHANGED since applied";
    case MigrationState::Kind::renamed: return "RENAMED";
    case MigrationState::Kind::unknown: return "UNKNOWN to this binary";
    case MigrationState::Kind::pending: return "pending";
    }
    return "pending";
}

bool refused(MigrationState::Kind kind)
{
    return kind == MigrationState::Kind::changed || kind == MigrationState::Kind::renamed ||
           kind == MigrationState::Kind::unknown;
}

std::vector<MigrationState> migration_status(pqxx::connection& conn)
{
    pqxx::read_transaction tx(conn);
    return compare_migrations(tx);
}

int latest_known_version()
{
    const auto& all = embedded_migrations();
    return all.empty() ? 0 : all.back().version;
}

MigrationReport apply_migrations(pqxx::connection& conn)
{
    {
        // Every command that may be the first against a database runs this, and the
        // database is almost always current already: one unlocked read (two
        // statements in autocommit) settles that. Anything else (never migrated,
        // pending, a digest to record, a mismatch to refuse, a migration committing
        // meanwhile) takes the locked path below, which decides it again.
        pqxx::nontransaction read(conn);
        const auto states = compare_migrations(read);
        const bool current = !states.empty() && std::all_of(states.begin(), states.end(), [](const MigrationState& m) {
            return m.kind == MigrationState::Kind::applied;
        });
        if (current) {
            MigrationReport report;
            report.from_version = report.to_version = latest_known_version();
            return report;
        }
    }
    pqxx::work tx(conn);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", k_migration_lock_key);
    tx.exec0("CREATE TABLE IF NOT EXISTS schema_migrations ("
             " version integer PRIMARY KEY,"
             " name text NOT NULL,"
             " applied_at timestamptz NOT NULL DEFAULT now(),"
             " checksum text)");
    ensure_checksum_column(tx);
    MigrationReport report;
    report.from_version = read_version(tx);
    if (report.from_version > latest_known_version()) {
        throw SchemaMismatch(newer_message(report.from_version));
    }
    report.checksums_recorded = verify_applied(tx);
    for (const auto& m : embedded_migrations()) {
        if (m.version <= report.from_version) {
            continue;
        }
        tx.exec0(m.sql);
        tx.exec_params0("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", m.version,
                        m.name, m.sha256);
        report.applied.emplace_back(m.name);
    }
    tx.commit();
    report.to_version = report.applied.empty() ? report.from_version : latest_known_version();
    for (const auto& name : report.applied) {
        log::info("applied migration", {{"migration", name}});
    }
    if (report.checksums_recorded > 0) {
        log::info("recorded the digests of migrations applied without one or with an earlier wording",
                  {{"migrations", std::to_string(report.checksums_recorded)}});
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
