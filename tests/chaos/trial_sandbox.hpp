#pragma once

#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace orch::chaos {

// Everything one trial owns: a scratch database, a root directory under /tmp
// (plugins/, data/, records/, logs/) and optionally a small tmpfs mounted as
// data/. The destructor SIGKILLs whatever of the trial is still alive (found by
// cookie / root path), unmounts the tmpfs and removes the root (kept when
// CHAOS_KEEP or ORCH_KEEP_TEST_DIRS is set, keep() was called or the tmpfs
// would not unmount).
class TrialSandbox {
public:
    explicit TrialSandbox(const std::string& tag, long tmpfs_bytes = 0);
    ~TrialSandbox();
    TrialSandbox(const TrialSandbox&) = delete;
    TrialSandbox& operator=(const TrialSandbox&) = delete;

    const std::string& db_url() const { return m_db.url(); }
    const std::filesystem::path& root() const { return m_root.path(); }
    std::filesystem::path plugins() const { return m_root / "plugins"; }
    std::filesystem::path data() const { return m_root / "data"; }
    std::filesystem::path records() const { return m_root / "records"; }
    bool tmpfs_mounted() const { return m_mounted; }
    void keep() { m_keep = true; }

    // `orchestrator add` of `urls` into this sandbox; returns the crawl id ("" + error on failure).
    std::string add_crawl(const std::vector<std::string>& urls, std::string& error,
                          const std::vector<std::string>& options = {}) const;

    // Environment for every orchestrator of the trial (small lease and grace).
    test::EnvChanges orchestrator_env(const test::EnvChanges& extra = {}) const;
    std::vector<std::string> orchestrator_argv(bool daemon, const std::vector<std::string>& extra = {}) const;
    // Starts an orchestrator; its output goes to logs/<name>.log when it is destroyed.
    std::unique_ptr<test::SpawnedProcess> start_orchestrator(bool daemon, const test::EnvChanges& extra = {},
                                                            const std::vector<std::string>& extra_args = {}) const;
    void save_log(const std::string& name, const test::SpawnedProcess& p) const;

    // Cookies recorded in this trial's process table (for the OS scan).
    std::vector<std::string> cookies() const;
    // archive-orch cgroup scope directory of this trial's data directory.
    std::filesystem::path cgroup_scope() const;

private:
    test::ScratchDatabase m_db;
    test::ScratchDir m_root;
    bool m_mounted = false;
    bool m_keep = false;
};

} // namespace orch::chaos
