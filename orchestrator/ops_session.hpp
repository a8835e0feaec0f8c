#pragma once

#include "common/config/cli_options.hpp"
#include "common/db/database.hpp"

#include <pqxx/pqxx>

#include <string>
#include <vector>

namespace orch {

// One named, parameterised statement of an ops command: prepared under `name`.
struct OpsStatement {
    std::string name;
    std::string sql;
};

// Prepares `statements` on `conn`. Preparing a name again with the same SQL is a
// no-op (libpqxx keeps the definitions), so a command acting on several crawls
// over one connection may prepare its statements for each of them.
void prepare_statements(pqxx::connection& conn, const std::vector<OpsStatement>& statements);

// The open-and-prepare start every ops command shares: its database connection,
// with the schema checked and the command's statements prepared. One per command;
// not thread-safe (one connection).
class OpsSession {
public:
    enum class Schema {
        current,  // read-only commands: the schema must be current; never migrates
        migrated, // commands that write: migrations are applied first
    };

    // Connects: with an external database an operator's command needs no data
    // directory, and none is made; the embedded cluster lives in it, so there it
    // is made. Then checks or migrates the schema and prepares `statements`.
    // Throws what Database::open, require_current_schema and apply_migrations throw.
    OpsSession(const CommonOptions& options, Schema schema, const std::vector<OpsStatement>& statements = {});

    pqxx::connection& conn() { return m_db.conn(); }

private:
    Database m_db;
};

} // namespace orch
