#pragma once

#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
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

// A scratch database and a temp root holding a plugins directory, data
// directories and the hook log; helpers to write hooks, add crawls, run the real
// orchestrator (which runs the real workers) and look at what it left in the
// database and the OS. The temp root is removed unless ORCH_KEEP_TEST_DIRS is set.
class OrchFixture {
public:
    OrchFixture();
    OrchFixture(const OrchFixture&) = delete;
    OrchFixture& operator=(const OrchFixture&) = delete;

    ScratchDatabase db;
    ScratchDir root; // before everything that lives in it
    std::filesystem::path plugins;
    std::filesystem::path data;     // the default data directory
    std::filesystem::path hook_log; // appended to by logging hooks

    // `orchestrator add` of `urls` with extra options; returns the crawl id.
    std::string add_crawl(const std::vector<std::string>& urls, const std::vector<std::string>& options = {});
    // <prefix>1 .. <prefix>n
    static std::vector<std::string> site_urls(int n, const std::string& prefix = "http://site.test/");

    // Writes plugins/<plugin>/<file>: a bash preamble setting $url, $snap and $crawl, then `body`.
    std::filesystem::path write_hook(const std::string& plugin, const std::string& file, const std::string& body);
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

    // First column of the first row of `sql` ("" for NULL or no row).
    std::string scalar(const std::string& sql);
    long count(const std::string& sql) { return std::stol(scalar(sql)); }
    std::vector<std::vector<std::string>> rows(const std::string& sql);
    void exec(const std::string& sql);
    std::string quote(const std::string& text);

    // Live processes carrying the cookie of a process row matching `where` (SQL)
    // and, when `by_path`, those naming the temp root on their command line: "pid cmdline".
    std::vector<std::string> our_processes(const std::string& where = "TRUE", bool by_path = true);
    // Same, as "pid cmdline" lines, polled until empty or `timeout`.
    std::vector<std::string> wait_no_leftovers(std::chrono::milliseconds timeout = std::chrono::seconds(10));

private:
    pqxx::connection& conn();
    std::unique_ptr<pqxx::connection> m_conn;
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
bool process_alive(pid_t pid);
// utime + stime of a process, in seconds.
double cpu_seconds(pid_t pid);

} // namespace orch::test
