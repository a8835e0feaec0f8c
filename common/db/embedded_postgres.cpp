#include "common/db/embedded_postgres.hpp"

#include "common/base/boost_process.hpp"
#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/db/conninfo_value.hpp"

#include <fmt/format.h>
#include <pqxx/pqxx>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_db_user = "archive";
constexpr const char* k_db_name = "archive";
// sun_path is 108 bytes including the terminating NUL.
constexpr std::size_t k_max_socket_path = 107;

struct Layout {
    fs::path pg_dir;
    fs::path cluster;
    fs::path run;
    fs::path server_log;
    fs::path start_lock;
    fs::path users_lock;
    fs::path on_demand_marker;

    explicit Layout(const fs::path& data_dir)
        : pg_dir(data_dir / "pg"),
          cluster(pg_dir / "cluster"),
          run(pg_dir / "run"),
          server_log(pg_dir / "server.log"),
          start_lock(pg_dir / "start.lock"),
          users_lock(pg_dir / "users.lock"),
          on_demand_marker(pg_dir / "started-on-demand")
    {
    }
};

// The identity the server runs as: ourselves, or `postgres` when we are root.
struct ServerUser {
    bool drop = false;
    uid_t uid = 0;
    gid_t gid = 0;
};

ServerUser server_user()
{
    if (::geteuid() != 0) {
        return {};
    }
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
        throw ConfigError("running as root: the embedded PostgreSQL must run as an unprivileged user, "
                          "but there is no 'postgres' system user (install postgresql-15, or set DATABASE_URL)");
    }
    return {true, pw->pw_uid, pw->pw_gid};
}

// Runs in the child between fork and exec: only async-signal-safe calls.
struct DropPrivileges {
    ServerUser user;

    template <typename Launcher>
    bp::error_code on_exec_setup(Launcher&, const std::filesystem::path&, const char* const*)
    {
        if (user.drop) {
            if (::setgroups(0, nullptr) != 0 || ::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) {
                return bp::error_code(errno, boost::system::system_category());
            }
        }
        return {};
    }
};

fs::path find_bindir()
{
    if (const char* env = std::getenv("PG_BINDIR"); env != nullptr && *env != '\0') {
        return env;
    }
    std::vector<fs::path> candidates;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        if (fs::exists(entry.path() / "bin" / "initdb")) {
            candidates.push_back(entry.path() / "bin");
        }
    }
    if (!candidates.empty()) {
        // Highest major version first ("15" > "13"; numeric compare so that "9" < "15").
        std::sort(candidates.begin(), candidates.end(), [](const fs::path& a, const fs::path& b) {
            return std::atoi(a.parent_path().filename().c_str()) > std::atoi(b.parent_path().filename().c_str());
        });
        return candidates.front();
    }
    for (const char* dir : {"/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin"}) {
        if (fs::exists(fs::path(dir) / "initdb") && fs::exists(fs::path(dir) / "pg_ctl")) {
            return dir;
        }
    }
    throw DatabaseUnavailable("PostgreSQL server programs (initdb, pg_ctl) not found: install postgresql-15, "
                              "set PG_BINDIR, or configure DATABASE_URL");
}

// Runs a PostgreSQL utility to completion, output appended to `log_path`. Returns its exit code.
int run_tool(const fs::path& exe, const std::vector<std::string>& args, const ServerUser& user, const fs::path& log_path)
{
    boost::asio::io_context ctx;
    int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        throw_errno("open " + log_path.string());
    }
    Fd log{log_fd};
    if (user.drop && ::fchown(log.get(), user.uid, user.gid) != 0) {
        throw_errno("chown " + log_path.string());
    }
    bp::process proc(ctx, exe, args, bp::process_stdio{nullptr, log.get(), log.get()}, DropPrivileges{user});
    return proc.wait();
}

std::string config_string_literal(const std::string& v)
{
    std::string out = "'";
    for (char c : v) {
        out += c;
        if (c == '\'') {
            out += '\'';
        }
    }
    return out + "'";
}

void make_dir(const fs::path& dir, mode_t mode, const ServerUser& owner)
{
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
        throw ConfigError(fmt::format("cannot create {}: {}", dir.string(), std::strerror(errno)));
    }
    if (owner.drop && ::chown(dir.c_str(), owner.uid, owner.gid) != 0) {
        throw_errno("chown " + dir.string());
    }
    ::chmod(dir.c_str(), mode);
}

Fd open_lock(const fs::path& path)
{
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        throw ConfigError(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    }
    return Fd{fd};
}

void lock(const Fd& fd, int op)
{
    while (::flock(fd.get(), op) != 0) {
        if (errno != EINTR) {
            throw_errno("flock");
        }
    }
}

bool is_running(const Layout& layout, const fs::path& bindir, const ServerUser& user)
{
    if (!fs::exists(layout.cluster / "PG_VERSION")) {
        return false;
    }
    return run_tool(bindir / "pg_ctl", {"-D", layout.cluster.string(), "status"}, user, layout.pg_dir / "pg_ctl.log") ==
           0;
}

std::string conninfo_for(const Layout& layout, const std::string& dbname)
{
    return fmt::format("host={} user={} dbname={}", quote_conninfo_value(layout.run.string()), k_db_user, dbname);
}

void initialise(const Layout& layout, const fs::path& bindir, const ServerUser& user)
{
    log::info("initialising embedded PostgreSQL cluster", {{"path", layout.cluster.string()}});
    make_dir(layout.cluster, 0700, user);
    // The server user must reach its files through every parent directory.
    if (user.drop && run_tool("/usr/bin/test", {"-w", layout.run.string()}, user, layout.pg_dir / "pg_ctl.log") != 0) {
        throw ConfigError(fmt::format("the 'postgres' user cannot reach {} (a parent directory is not searchable "
                                      "by others); choose a --data-dir it can reach, or set DATABASE_URL",
                                      layout.run.string()));
    }
    int rc = run_tool(bindir / "initdb",
                      {"-D", layout.cluster.string(), "-U", k_db_user, "--auth=trust", "-E", "UTF8", "--locale=C",
                       "--no-instructions"},
                      user, layout.pg_dir / "initdb.log");
    if (rc != 0) {
        throw DatabaseUnavailable(fmt::format("initdb failed with code {}; see {}", rc,
                                              (layout.pg_dir / "initdb.log").string()));
    }
    std::ofstream conf(layout.cluster / "postgresql.conf", std::ios::app);
    conf << "\n# Added by the orchestrator: private cluster, Unix socket only.\n"
         << "listen_addresses = ''\n"
         << "unix_socket_directories = " << config_string_literal(layout.run.string()) << "\n"
         << "unix_socket_permissions = 0700\n"
         << "max_connections = 300\n"
         << "log_min_messages = warning\n"
         // Our triggers are PL/pgSQL: loaded into the postmaster once, every
         // backend inherits it, instead of each new connection (every CLI
         // command, every worker) loading the library at its first trigger.
         << "shared_preload_libraries = 'plpgsql'\n";
    if (!conf) {
        throw ConfigError("cannot write " + (layout.cluster / "postgresql.conf").string());
    }
}

void start_server(const Layout& layout, const fs::path& bindir, const ServerUser& user)
{
    int rc = run_tool(bindir / "pg_ctl",
                      {"-D", layout.cluster.string(), "-l", layout.server_log.string(), "-w", "-t", "60", "start"},
                      user, layout.pg_dir / "pg_ctl.log");
    if (rc != 0) {
        throw DatabaseUnavailable(fmt::format("the embedded PostgreSQL did not start (pg_ctl exit {}); see {}", rc,
                                              layout.server_log.string()));
    }
    log::info("embedded PostgreSQL started", {{"socket_dir", layout.run.string()}});
}

void ensure_database(const Layout& layout)
{
    pqxx::connection conn(conninfo_for(layout, "postgres"));
    pqxx::nontransaction tx(conn);
    auto r = tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", k_db_name);
    if (r.empty()) {
        tx.exec0(std::string("CREATE DATABASE ") + k_db_name);
    }
}

// Brings the cluster up (initdb on first use). Caller holds the start lock.
// Returns true if this call started the server.
bool bring_up(const Layout& layout, const fs::path& bindir, const ServerUser& user)
{
    make_dir(layout.run, 0700, user);
    if (!fs::exists(layout.cluster / "PG_VERSION")) {
        initialise(layout, bindir, user);
    }
    if (is_running(layout, bindir, user)) {
        return false;
    }
    int log_fd = ::open(layout.server_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd >= 0) {
        Fd log{log_fd};
        if (user.drop && ::fchown(log.get(), user.uid, user.gid) != 0) {
            throw_errno("chown " + layout.server_log.string());
        }
    }
    start_server(layout, bindir, user);
    ensure_database(layout);
    return true;
}

Layout prepare(const fs::path& data_dir)
{
    Layout layout(data_dir);
    if ((layout.run / ".s.PGSQL.5432").string().size() > k_max_socket_path) {
        throw ConfigError(fmt::format("data directory path too long for a Unix socket ({} > {} bytes): {}",
                                      (layout.run / ".s.PGSQL.5432").string().size(), k_max_socket_path,
                                      data_dir.string()));
    }
    make_dir(layout.pg_dir, 0755, ServerUser{});
    return layout;
}

} // namespace

EmbeddedCluster::Lease::Lease(fs::path pg_dir, std::string conninfo, Fd users_lock)
    : m_pg_dir(std::move(pg_dir)), m_conninfo(std::move(conninfo)), m_users_lock(std::move(users_lock))
{
}

EmbeddedCluster::Lease::~Lease()
{
    try {
        Layout layout(m_pg_dir.parent_path());
        Fd start = open_lock(layout.start_lock);
        lock(start, LOCK_EX);
        // Upgrading to exclusive succeeds only when no other process holds a shared lock.
        if (::flock(m_users_lock.get(), LOCK_EX | LOCK_NB) == 0 && fs::exists(layout.on_demand_marker)) {
            auto user = server_user();
            auto bindir = find_bindir();
            int rc = run_tool(bindir / "pg_ctl", {"-D", layout.cluster.string(), "-m", "fast", "-w", "stop"}, user,
                              layout.pg_dir / "pg_ctl.log");
            std::error_code ec;
            fs::remove(layout.on_demand_marker, ec);
            log::info("embedded PostgreSQL stopped (last user left)", {{"pg_ctl_exit", std::to_string(rc)}});
        }
    } catch (const std::exception& e) {
        log::warn("could not stop the embedded PostgreSQL", {{"error", e.what()}});
    }
}

std::unique_ptr<EmbeddedCluster::Lease> EmbeddedCluster::acquire(const fs::path& data_dir)
{
    auto layout = prepare(data_dir);
    auto user = server_user();
    auto bindir = find_bindir();
    Fd start = open_lock(layout.start_lock);
    lock(start, LOCK_EX);
    Fd users = open_lock(layout.users_lock);
    lock(users, LOCK_SH);
    if (bring_up(layout, bindir, user)) {
        std::ofstream(layout.on_demand_marker) << ::getpid() << '\n';
    }
    return std::unique_ptr<Lease>(new Lease(layout.pg_dir, conninfo_for(layout, k_db_name), std::move(users)));
}

std::string EmbeddedCluster::start_explicit(const fs::path& data_dir)
{
    auto layout = prepare(data_dir);
    auto user = server_user();
    auto bindir = find_bindir();
    Fd start = open_lock(layout.start_lock);
    lock(start, LOCK_EX);
    bring_up(layout, bindir, user);
    std::error_code ec;
    fs::remove(layout.on_demand_marker, ec);
    return conninfo_for(layout, k_db_name);
}

bool EmbeddedCluster::stop(const fs::path& data_dir)
{
    auto layout = prepare(data_dir);
    auto user = server_user();
    auto bindir = find_bindir();
    Fd start = open_lock(layout.start_lock);
    lock(start, LOCK_EX);
    if (!is_running(layout, bindir, user)) {
        return false;
    }
    int rc = run_tool(bindir / "pg_ctl", {"-D", layout.cluster.string(), "-m", "fast", "-w", "stop"}, user,
                      layout.pg_dir / "pg_ctl.log");
    if (rc != 0) {
        throw DatabaseUnavailable(fmt::format("pg_ctl stop failed with code {}", rc));
    }
    std::error_code ec;
    fs::remove(layout.on_demand_marker, ec);
    return true;
}

bool EmbeddedCluster::running(const fs::path& data_dir)
{
    Layout layout(data_dir);
    if (!fs::exists(layout.cluster / "PG_VERSION")) {
        return false;
    }
    return is_running(layout, find_bindir(), server_user());
}

std::string EmbeddedCluster::conninfo(const fs::path& data_dir)
{
    return conninfo_for(Layout(data_dir), k_db_name);
}

} // namespace orch
