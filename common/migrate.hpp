#pragma once

#include <pqxx/pqxx>

#include <string>
#include <vector>

namespace orch {

struct MigrationReport {
    int from_version = 0;
    int to_version = 0;
    std::vector<std::string> applied; // names of the migrations applied by this call
    int checksums_recorded = 0;       // applied earlier without a digest; recorded by this call
};

// Highest migration version compiled into this binary.
int latest_known_version();

// Applies every embedded migration newer than the database's version, in one
// transaction under a transaction-scoped advisory lock: concurrent callers wait,
// then find nothing to do. Idempotent. Each applied migration's SHA-256 is kept in
// schema_migrations.checksum and compared at every call: throws SchemaMismatch
// (applying nothing) when an applied migration's name or digest differs from this
// binary's file of that version, or when the database is newer than this binary.
// A missing digest (applied by a binary that kept none) is recorded. pqxx errors
// propagate.
MigrationReport apply_migrations(pqxx::connection& conn);

// The database's schema version; 0 when it was never migrated.
int schema_version(pqxx::connection& conn);

// Throws SchemaMismatch unless the database is at exactly the version this binary
// knows. Versions only, one cheap read at every worker start: the digests are
// compared by apply_migrations, which the orchestrator runs before it starts any.
void require_current_schema(pqxx::connection& conn);

} // namespace orch
