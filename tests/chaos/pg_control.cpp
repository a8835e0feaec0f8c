#include "tests/chaos/pg_control.hpp"

#include "tests/support/command_runner.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace orch::chaos {

namespace fs = std::filesystem;

PgControl::PgControl(fs::path orchestrator_data_dir)
{
    if (orchestrator_data_dir.empty()) {
        return;
    }
    auto pgdata = orchestrator_data_dir / "pg" / "cluster";
    if (!fs::exists(pgdata / "PG_VERSION")) {
        return;
    }
    for (const auto& dir : {"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}) {
        if (fs::exists(fs::path(dir) / "pg_ctl")) {
            m_pg_ctl = (fs::path(dir) / "pg_ctl").string();
            break;
        }
    }
    if (m_pg_ctl.empty()) {
        return;
    }
    struct stat st{};
    if (::stat(pgdata.c_str(), &st) == 0 && ::getuid() == 0 && st.st_uid != 0) {
        if (auto* pw = ::getpwuid(st.st_uid)) {
            m_owner = pw->pw_name;
        }
    }
    m_pgdata = pgdata;
    m_log = orchestrator_data_dir / "pg" / "server.log";
}

bool PgControl::pg_ctl(const std::vector<std::string>& args)
{
    std::vector<std::string> argv;
    if (!m_owner.empty()) {
        argv = {"/usr/sbin/runuser", "-u", m_owner, "--"};
    }
    argv.push_back(m_pg_ctl);
    argv.insert(argv.end(), {"-D", m_pgdata.string()});
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = test::run_command(argv);
    m_last_error = r.exit_code == 0 ? "" : r.err + r.out;
    return r.exit_code == 0;
}

bool PgControl::restart()
{
    return pg_ctl({"-l", m_log.string(), "-m", "fast", "-w", "-t", "60", "restart"});
}

bool PgControl::stop()
{
    return pg_ctl({"-m", "fast", "-w", "-t", "60", "stop"});
}

bool PgControl::start()
{
    return pg_ctl({"-l", m_log.string(), "-w", "-t", "60", "start"});
}

bool PgControl::running()
{
    return pg_ctl({"status"});
}

} // namespace orch::chaos
