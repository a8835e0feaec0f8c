#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace orch::chaos {

// Stops and starts the chaos run's own PostgreSQL cluster: the one
// `orchestrator db start --data-dir <dir>` made (PGDATA = <dir>/pg/cluster).
// As root pg_ctl runs as the cluster's owner (runuser). Never point this at a
// shared cluster: other users lose their connections.
class PgControl {
public:
    explicit PgControl(std::filesystem::path orchestrator_data_dir);
    bool available() const { return !m_pgdata.empty(); }
    const std::filesystem::path& pgdata() const { return m_pgdata; }

    // Each returns true when pg_ctl exited 0 (messages go to `last_error`).
    bool restart();   // -m fast, waits for the server to accept connections
    bool stop();      // -m fast
    bool start();     // waits until it accepts connections
    bool running();
    const std::string& last_error() const { return m_last_error; }

private:
    bool pg_ctl(const std::vector<std::string>& args);
    std::filesystem::path m_pgdata;
    std::filesystem::path m_log;
    std::string m_pg_ctl;
    std::string m_owner;
    std::string m_last_error;
};

} // namespace orch::chaos
