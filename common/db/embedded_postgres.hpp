#pragma once

#include "common/base/fd.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace orch {

// The private PostgreSQL cluster kept under DATA_DIR/pg when no database URL is
// configured. It listens on a Unix socket inside DATA_DIR/pg/run only (no TCP).
// As root, the server runs as the unprivileged `postgres` user.
//
// Reference counting across processes uses flock(2): every user holds a shared
// lock on DATA_DIR/pg/users.lock while it uses the cluster; the last user to
// leave stops the server, but only if it was started on demand (not by
// `orchestrator db start`).
class EmbeddedCluster {
public:
    // A use of the cluster; the server stays up while any lease exists (in any process).
    class Lease {
    public:
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        // Stops the server if this was the last user and the server was started on demand.
        ~Lease();
        const std::string& conninfo() const { return m_conninfo; }

    private:
        friend class EmbeddedCluster;
        Lease(std::filesystem::path pg_dir, std::string conninfo, Fd users_lock);
        std::filesystem::path m_pg_dir;
        std::string m_conninfo;
        Fd m_users_lock;
    };

    // Initialises (first use) and starts the cluster if needed; blocks until it accepts
    // connections. Throws DatabaseUnavailable when it cannot start, ConfigError when the
    // data directory is unusable.
    static std::unique_ptr<Lease> acquire(const std::filesystem::path& data_dir);

    // Starts the cluster and marks it as explicitly started (stays up until stop()).
    // Returns the connection string.
    static std::string start_explicit(const std::filesystem::path& data_dir);
    // Stops the server if it runs. Returns false if it was not running.
    static bool stop(const std::filesystem::path& data_dir);
    // Whether the server runs.
    static bool running(const std::filesystem::path& data_dir);
    // The connection string for the cluster under data_dir (whether or not it runs).
    static std::string conninfo(const std::filesystem::path& data_dir);
};

} // namespace orch
