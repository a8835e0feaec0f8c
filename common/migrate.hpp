#pragma once

#include <pqxx/pqxx>

#include <string>
#include <vector>

namespace orch {

struct MigrationReport {
    int from_version = 0;
    int to_version = 0;
    std::vector<std::string> applied; // names of the migrations applied by this call
};

// Highest migration version compiled into this binary.
int latest_known_version();

// Applies every embedded migration newer than the database's version, in one
// transaction under a transaction-scoped advisory lock: concurrent callers wait,
// then find nothing to do. Idempotent. Throws SchemaMismatch when the database is
// newer than this binary; pqxx errors propagate.
MigrationReport apply_migrations(pqxx::connection& conn);

// The database's schema version; 0 when it was never migrated.
int schema_version(pqxx::connection& conn);

// Throws SchemaMismatch unless the database is at exactly the version this binary knows.
void require_current_schema(pqxx::connection& conn);

} // namespace orch
