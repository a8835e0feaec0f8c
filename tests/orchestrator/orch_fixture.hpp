#pragma once

#include "tests/support/proc_state.hpp"
#include "tests/support/scratch_archive.hpp"
#include "tests/support/spawned_process.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// Prints a measured figure on stdout ("[measure] ..."), for the test log and the report.
#define MEASURE(...) (std::cout << "[measure] " << __VA_ARGS__ << std::endl)

namespace orch::test {

// One run of a logging hook, from the shared hook log: "<snapshot> <hook> <pid> start|end <epoch>".
struct HookRun {
    std::string snapshot;
    std::string hook;
    int pid = 0;
    double start = 0;
    std::optional<double> end; // absent when the run was killed
};

// A scratch archive (database, plugins and data directories, its hooks and
// crawls) plus the hook log; helpers to run the real orchestrator (which runs
// the real workers) and look at what it left in the database and the OS.
class OrchFixture : public ScratchArchive {
public:
    OrchFixture();

    std::filesystem::path hook_log; // appended to by logging hooks

    // <prefix>1 .. <prefix>n
    static std::vector<std::string> site_urls(int n, const std::string& prefix = "http://site.test/");

    // A Snapshot hook that logs its start and end to hook_log, runs `middle` (default:
    // sleep `seconds`) and prints a succeeded ArchiveResult.
    void write_logging_hook(const std::string& plugin, const std::string& file, double seconds,
                            const std::string& middle = {});
    std::vector<HookRun> hook_runs() const;

    // Environment of every orchestrator run: no built-in plugins, our plugins dir,
    // a 1 s teardown grace, nothing inherited that would change the run; `extra` on top.
    EnvChanges env(const EnvChanges& extra = {}) const;
    std::vector<std::string> argv(const std::vector<std::string>& options, const std::string& machine_id,
                                  const std::filesystem::path& data_dir) const;
    // Starts `orchestrator <options>` in the background (machine id and data dir added).
    std::unique_ptr<SpawnedProcess> start(const std::vector<std::string>& options = {},
                                          const std::string& machine_id = "machine-a",
                                          const std::optional<std::filesystem::path>& data_dir = std::nullopt,
                                          const EnvChanges& extra = {});
    // Runs a one-shot orchestrator to completion; fails the test past `timeout`.
    std::unique_ptr<SpawnedProcess> run(const std::vector<std::string>& options = {},
                                        const std::string& machine_id = "machine-a",
                                        std::chrono::milliseconds timeout = std::chrono::seconds(120));
    // Polls until the running orchestrator row of `pid` exists.
    bool wait_registered(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(20));


};

// "exit <code> signal <sig>" and the child's stderr, for INFO().
std::string describe(const SpawnedProcess& p);

// Pairs of rows of one kind (a `process` WHERE clause) on the same `key` column whose
// [started_at, ended_at] intervals overlap: each is a snapshot run by two workers at once.
long overlapping_process_rows(OrchFixture& f, const std::string& where, const std::string& key);
// Pairs of runs of one hook on one snapshot that overlap in time (from the hook log;
// runs that were killed logged no end and are not counted).
long overlapping_hook_runs(const std::vector<HookRun>& runs);

// Text of a file ("" if absent).
std::string read_file_text(const std::filesystem::path& path);
// utime + stime of a process, in seconds.
double cpu_seconds(pid_t pid);

} // namespace orch::test
