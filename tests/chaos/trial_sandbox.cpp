#include "tests/chaos/trial_sandbox.hpp"

#include "common/recorder/self_registration.hpp"
#include "tests/chaos/db_query.hpp"
#include "tests/chaos/os_scan.hpp"
#include "tests/support/command_runner.hpp"

#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace orch::chaos {

namespace fs = std::filesystem;

TrialSandbox::TrialSandbox(const std::string& tag, long tmpfs_bytes)
    : m_root("orch-chaos-" + tag + "-")
{
    // World-searchable: as root, processes may run as other users (postgres, nobody).
    fs::permissions(m_root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    for (const auto& d : {"plugins", "data", "records", "logs"}) {
        fs::create_directories(m_root / d);
    }
    if (tmpfs_bytes > 0) {
        auto opts = "size=" + std::to_string(tmpfs_bytes) + ",mode=0755";
        if (::mount("tmpfs", data().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
            throw std::runtime_error("cannot mount a tmpfs on " + data().string() + " (root needed)");
        }
        m_mounted = true;
    }
}

TrialSandbox::~TrialSandbox()
{
    try {
        kill_leftovers(cookies(), root().string());
    } catch (const std::exception& e) {
        kill_leftovers({}, root().string());
    }
    if (m_mounted) {
        for (int i = 0; i < 50 && ::umount2(data().c_str(), 0) != 0; ++i) {
            ::usleep(100'000);
        }
        if (::umount2(data().c_str(), MNT_DETACH) == 0 || errno == EINVAL) {
            m_mounted = false;
        }
    }
    // Still mounted: removal would empty the tmpfs and fail on its mount point, so keep it.
    if (m_keep || std::getenv("CHAOS_KEEP") != nullptr || m_mounted) {
        std::cerr << "chaos: kept " << m_root.release().string() << "\n";
    }
    // Otherwise m_root removes the directory once this body is done.
}

std::string TrialSandbox::add_crawl(const std::vector<std::string>& urls, std::string& error,
                                    const std::vector<std::string>& options) const
{
    std::vector<std::string> argv = {test::bin_path("orchestrator").string(), "add", "--database-url", db_url(),
                                     "--data-dir", data().string(), "--urls-file", "-"};
    argv.insert(argv.end(), options.begin(), options.end());
    std::string input;
    for (const auto& u : urls) {
        input += u + "\n";
    }
    auto r = test::run_command(argv, {{"DATABASE_URL", ""}, {"DATA_DIR", ""}}, input);
    if (r.exit_code != 0) {
        error = "orchestrator add exited " + std::to_string(r.exit_code) + ": " + r.err;
        return {};
    }
    return r.out.substr(0, r.out.find('\n'));
}

test::EnvChanges TrialSandbox::orchestrator_env(const test::EnvChanges& extra) const
{
    test::EnvChanges env = {{"ORCH_BUILTIN_PLUGINS_DIR", ""},
                            {"PLUGINS_DIR", plugins().string()},
                            {"TEARDOWN_GRACE", "1"},
                            {"LEASE_TTL", "4"},
                            {"SNAPSHOT_MAX_ATTEMPTS", "3"},
                            {"MAX_SNAPSHOT_WORKERS", "4"},
                            {"HOOK_PARALLELISM", std::nullopt},
                            {"DATABASE_URL", std::nullopt},
                            {"DATA_DIR", std::nullopt},
                            {"PGPASSWORD", std::nullopt},
                            {"ORCH_PROCESS_COOKIE", std::nullopt},
                            {"LOG_LEVEL", "info"}};
    for (const auto& [k, v] : extra) {
        env[k] = v;
    }
    return env;
}

std::vector<std::string> TrialSandbox::orchestrator_argv(bool daemon, const std::vector<std::string>& extra) const
{
    std::vector<std::string> argv = {test::bin_path("orchestrator").string(), "--database-url", db_url(),
                                     "--data-dir", data().string(), "--stop-grace", "5", "--poll-interval", "1"};
    if (daemon) {
        argv.push_back("--daemon");
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

std::unique_ptr<test::SpawnedProcess> TrialSandbox::start_orchestrator(bool daemon, const test::EnvChanges& extra,
                                                                      const std::vector<std::string>& extra_args) const
{
    return std::make_unique<test::SpawnedProcess>(orchestrator_argv(daemon, extra_args), orchestrator_env(extra));
}

void TrialSandbox::save_log(const std::string& name, const test::SpawnedProcess& p) const
{
    std::ofstream(m_root / "logs" / (name + ".log")) << p.err() << p.out();
}

std::vector<std::string> TrialSandbox::cookies() const
{
    std::vector<std::string> out;
    for (const auto& row : query_retry(db_url(), "SELECT cookie FROM process WHERE cookie IS NOT NULL", 30)) {
        out.push_back(row[0]);
    }
    return out;
}

fs::path TrialSandbox::cgroup_scope() const
{
    return fs::path("/sys/fs/cgroup/unified/archive-orch") / containment_scope(data().string());
}

} // namespace orch::chaos
