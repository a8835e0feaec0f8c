#pragma once

#include <pqxx/pqxx>

#include <filesystem>
#include <string>

// A snapshot's index.json: what the database says of a sealed snapshot, in its
// own directory, so that an archive can be read without the database. The
// document is described field by field in docs/archive-layout.md (and
// docs/snapshot-index.schema.json); k_snapshot_index_format is its "format".
namespace orch {

inline constexpr int k_snapshot_index_format = 1;

// `column` (a timestamptz expression) as JSON text in UTC, "2026-01-02T03:04:05.123456Z",
// whatever the session's TimeZone; NULL stays NULL. For the index documents' SQL.
std::string index_timestamp_sql(const std::string& column);

// The snapshot's index document as the database has it now (one read
// statement, prepared once per connection), serialized; "" when there is no
// such snapshot. Never holds secrets: no environment, command line or
// database URL is read. Throws what libpqxx throws. Must not be called while a
// transaction is open on `conn`.
std::string snapshot_index_document(pqxx::connection& conn, const std::string& snapshot_id);

// Writes snapshot_index_document() to `<snap_dir>/index.json` atomically
// (a temporary file beside it, renamed over it), creating `snap_dir` if need
// be. Called after the snapshot's seal committed: a failure is logged as a
// warning and returned as false, never thrown, so it can never fail the seal.
bool write_snapshot_index(pqxx::connection& conn, const std::string& snapshot_id,
                          const std::filesystem::path& snap_dir) noexcept;

} // namespace orch
