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
// A missing digest (applied by a binary that kept none) is recorded. A database
// whose migrations are exactly this binary's, digests included, is recognised by
// one read without the lock and left untouched. pqxx errors propagate.
MigrationReport apply_migrations(pqxx::connection& conn);

// One migration as the database and this binary know it (migration_status).
struct MigrationState {
    enum class Kind {
        applied,    // applied, with this binary's name and digest
        unrecorded, // applied without a digest: the next apply_migrations records it
        reworded,   // applied with the digest of an earlier wording (only comments
                    // changed): the next apply_migrations records this binary's
        changed,    // applied with another digest than this binary's file
        renamed,    // applied under another name than this binary's file of that version
        unknown,    // applied, and this binary has no migration of that version
        pending,    // this binary's, not applied yet
    };
    int version = 0;
    std::string name;                // this binary's, or the database's for `unknown`
    Kind kind = Kind::pending;
    std::string applied_as;          // the database's name, for `renamed`
    std::string applied_at;          // as PostgreSQL prints it; empty when pending
    std::string recorded_sha256;     // the database's digest; empty when none
    std::string sha256;              // this binary's; empty for `unknown`
};
const char* kind_name(MigrationState::Kind kind);
// True for the kinds apply_migrations refuses (changed, renamed, unknown).
bool refused(MigrationState::Kind kind);

// Every migration of the database and of this binary, by version, compared as
// apply_migrations would compare them, without writing anything (one read-only
// transaction). A database never migrated gives every migration pending. pqxx
// errors propagate.
std::vector<MigrationState> migration_status(pqxx::connection& conn);

// The database's schema version; 0 when it was never migrated.
int schema_version(pqxx::connection& conn);

// Throws SchemaMismatch unless the database is at exactly the version this binary
// knows. Versions only, one cheap read at every worker start: the digests are
// compared by apply_migrations, which the orchestrator runs before it starts any.
void require_current_schema(pqxx::connection& conn);

} // namespace orch
