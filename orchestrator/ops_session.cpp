#include "orchestrator/ops_session.hpp"

#include "common/db/migrate.hpp"

namespace orch {
namespace {

Database open_database(const CommonOptions& options)
{
    // Asking a server for a status must not leave a data directory behind in the
    // current directory.
    const auto data_dir = options.database_url.empty() ? prepare_data_dir(options) : data_dir_path(options);
    return Database::open(options, data_dir);
}

} // namespace

void prepare_statements(pqxx::connection& conn, const std::vector<OpsStatement>& statements)
{
    for (const auto& statement : statements) {
        conn.prepare(statement.name, statement.sql);
    }
}

OpsSession::OpsSession(const CommonOptions& options, Schema schema, const std::vector<OpsStatement>& statements)
    : m_db(open_database(options))
{
    if (schema == Schema::migrated) {
        apply_migrations(m_db.conn());
    } else {
        require_current_schema(m_db.conn());
    }
    prepare_statements(m_db.conn(), statements);
}

} // namespace orch
