#pragma once

#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace orch::test {

// A scratch database plus a temp root (plugins/, data/, out/) for driving the
// real executables with bad input and hostile hooks. The root is removed on
// destruction (kept with ORCH_KEEP_TEST_DIRS).
class SecurityFixture {
public:
    SecurityFixture();
    SecurityFixture(const SecurityFixture&) = delete;
    SecurityFixture& operator=(const SecurityFixture&) = delete;

    ScratchDatabase db;
    ScratchDir root; // before everything that lives in it
    std::filesystem::path plugins;
    std::filesystem::path data;
    std::filesystem::path out;  // where hooks leave evidence for the test

    // Writes plugins/<plugin>/<file> as a bash hook (preamble sets $url $snap $crawl).
    std::filesystem::path write_hook(const std::string& plugin, const std::string& file, const std::string& body);
    // `orchestrator add` (must succeed); returns the crawl id.
    std::string add_crawl(const std::vector<std::string>& urls);

    // Environment for the executables: no built-in plugins, our plugins dir,
    // short grace, nothing inherited that names a database or data dir.
    std::map<std::string, std::string> env(const std::map<std::string, std::string>& extra = {}) const;
    // Runs `bin` (orchestrator, crawl_worker, snapshot_worker) with `args`;
    // --database-url/--data-dir are added unless `args` already has them.
    CommandResult run(const std::string& bin, std::vector<std::string> args,
                      const std::map<std::string, std::string>& extra_env = {}) const;

    // Row counts + checksum of every table (machine.last_seen ignored).
    std::string fingerprint() const;
    std::string scalar(const std::string& sql) const;
};

} // namespace orch::test
