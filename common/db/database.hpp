#pragma once

#include "common/config/cli_options.hpp"
#include "common/db/embedded_postgres.hpp"

#include <pqxx/pqxx>

#include <filesystem>
#include <memory>
#include <string>

namespace orch {

// One process's database connection, plus its use of the embedded cluster when
// no database URL is configured. Not thread-safe (one connection per process).
class Database {
public:
    // Connects with `options.database_url`, or starts/uses the embedded cluster under
    // `data_dir`. Throws DatabaseUnavailable (with libpq's reason) or ConfigError.
    static Database open(const CommonOptions& options, const std::filesystem::path& data_dir);
    // Connects to an explicit connection string. Throws DatabaseUnavailable.
    static Database connect(const std::string& conninfo);

    Database(Database&&) noexcept = default;
    Database& operator=(Database&&) noexcept = default;
    ~Database();

    pqxx::connection& conn() { return *m_conn; }
    // The connection string used (passed on to spawned workers; never to hooks).
    const std::string& conninfo() const { return m_conninfo; }
    bool embedded() const { return m_cluster != nullptr; }

    // Drops and re-establishes the connection (after a broken_connection). Throws DatabaseUnavailable.
    void reconnect();

private:
    Database() = default;
    std::unique_ptr<EmbeddedCluster::Lease> m_cluster; // destroyed after m_conn
    std::unique_ptr<pqxx::connection> m_conn;
    std::string m_conninfo;
};

// Opens a libpq connection, mapping failures to DatabaseUnavailable with a clear
// message; a refusal is retried for as long as the calling thread's outage
// policy says (connect_through_outage: none by default).
std::unique_ptr<pqxx::connection> open_connection(const std::string& conninfo);

} // namespace orch
