#include "common/db/database.hpp"

#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"

#include <fmt/format.h>

namespace orch {

std::unique_ptr<pqxx::connection> open_connection(const std::string& conninfo)
{
    try {
        return connect_through_outage([&conninfo] { return std::make_unique<pqxx::connection>(conninfo); });
    } catch (const pqxx::broken_connection& e) {
        std::string reason = e.what();
        while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) {
            reason.pop_back();
        }
        throw DatabaseUnavailable(fmt::format("cannot connect to PostgreSQL: {}", reason));
    } catch (const pqxx::failure& e) {
        throw DatabaseUnavailable(fmt::format("cannot connect to PostgreSQL: {}", e.what()));
    } catch (const std::invalid_argument& e) {
        throw DatabaseUnavailable(fmt::format("invalid database URL: {}", e.what()));
    }
}

Database Database::open(const CommonOptions& options, const std::filesystem::path& data_dir)
{
    if (!options.database_url.empty()) {
        return connect(options.database_url);
    }
    Database db;
    db.m_cluster = EmbeddedCluster::acquire(data_dir);
    db.m_conninfo = db.m_cluster->conninfo();
    db.m_conn = open_connection(db.m_conninfo);
    return db;
}

Database Database::connect(const std::string& conninfo)
{
    Database db;
    db.m_conninfo = conninfo;
    db.m_conn = open_connection(conninfo);
    return db;
}

Database::~Database()
{
    // The connection must close before the cluster lease may stop the server.
    m_conn.reset();
    m_cluster.reset();
}

void Database::reconnect()
{
    m_conn.reset();
    m_conn = open_connection(m_conninfo);
}

} // namespace orch
