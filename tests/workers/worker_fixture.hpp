#pragma once

#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace orch::test {

// One archive_result row, as the tests look at it.
struct ResultRow {
    std::string status;
    std::string error;       // "" when NULL
    std::string output_str;  // "" when NULL
    std::string output_json; // JSON text, "" when NULL
    std::string output_files;
    std::string process_id;  // "" when NULL
    int attempts = 0;
};

// A scratch database, a temp root with a plugins directory and a data
// directory, and helpers to write hook scripts, insert crawls/snapshots, run
// the real snapshot_worker and look at what it left in the database and the OS.
// The temp root is removed on destruction unless ORCH_KEEP_TEST_DIRS is set.
class WorkerFixture {
public:
    WorkerFixture();

    ScratchDatabase db;
    ScratchDir root; // before everything that lives in it
    std::filesystem::path plugins;
    std::filesystem::path data;
    // "fallback" forces the fallback containment (ORCH_CONTAINMENT) for every
    // worker run; empty = what the machine offers (cgroup2 here).
    std::string containment;

    // Inserts a crawl of scope 'any' (its pages link to other hosts; scopes
    // have tests of their own in tests/crawl/test_crawl_scope.cpp); returns its id.
    std::string add_crawl(int max_depth = 0, std::optional<int> max_urls = std::nullopt,
                          const std::string& config_json = "{}");
    // Inserts a snapshot of `crawl`; returns its id.
    std::string add_snapshot(const std::string& crawl, const std::string& url, int depth = 0);
    // A crawl with one snapshot of http://a.test/; returns the snapshot id.
    std::string add_simple_snapshot();

    // Writes plugins/<plugin>/<file> (mode 0755 unless `executable` is false).
    std::filesystem::path write_hook(const std::string& plugin, const std::string& file, const std::string& body,
                                     bool executable = true);
    void write_config(const std::string& plugin, const std::string& json);
    // A path under the temp root, for files hooks write.
    std::filesystem::path file(const std::string& name) const { return root / name; }

    // Environment every worker run gets: no built-in plugins, our plugins dir,
    // a short teardown grace; `extra` is applied on top.
    EnvChanges worker_env(const EnvChanges& extra = {}) const;
    std::vector<std::string> worker_argv(const std::string& snapshot_id) const;
    std::unique_ptr<SpawnedProcess> start_worker(const std::string& snapshot_id, const EnvChanges& extra = {}) const;
    // Runs a worker to completion (fails the test if it takes longer than `timeout`).
    std::unique_ptr<SpawnedProcess> run_worker(const std::string& snapshot_id, const EnvChanges& extra = {},
                                               std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

    // Results of a snapshot by hook file name (the part after "<plugin>/").
    std::map<std::string, ResultRow> results(const std::string& snapshot_id) const;
    // One value of a query (committed) with the given text parameters ("" for NULL).
    std::string scalar(const std::string& sql, const std::vector<std::string>& params = {}) const;
    void exec(const std::string& sql, const std::vector<std::string>& params = {}) const;

    // Live (non-zombie) processes that carry one of the cookies recorded in the
    // process table or name the temp root on their command line.
    std::vector<std::string> leftover_processes() const;
    // Polls until leftover_processes() is empty; returns what is still left.
    std::vector<std::string> wait_no_leftovers(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
};

// Contents of a text file ("" if absent).
std::string read_text(const std::filesystem::path& path);
// Lines of a text file (none if absent).
std::vector<std::string> read_lines(const std::filesystem::path& path);
// How many lines of `path` equal `line`.
long count_lines(const std::filesystem::path& path, const std::string& line);

} // namespace orch::test
