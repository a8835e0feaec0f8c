#pragma once

#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace orch::test {

// Environment changes for a child: a value sets the variable (the empty string
// included), nullopt unsets it. Everything else is inherited from the test.
using CrawlEnv = std::map<std::string, std::optional<std::string>>;

// One crawl_worker started by a test in the background, stdout and stderr
// captured in one file. The destructor SIGKILLs and reaps it if still running.
class CrawlWorkerProcess {
public:
    // Throws std::runtime_error when fork fails.
    CrawlWorkerProcess(const std::vector<std::string>& argv, const CrawlEnv& env, std::filesystem::path log);
    ~CrawlWorkerProcess();
    CrawlWorkerProcess(const CrawlWorkerProcess&) = delete;
    CrawlWorkerProcess& operator=(const CrawlWorkerProcess&) = delete;

    pid_t pid() const { return m_pid; }
    // Polls until the process exits or `timeout` passes; true when it exited.
    bool wait_for(std::chrono::milliseconds timeout);
    bool exited() const { return m_exited; }
    void signal(int sig) const;
    int exit_code() const { return m_exit_code; } // -1 unless it exited normally
    int term_signal() const { return m_signal; }  // 0 unless killed by a signal
    std::string output() const;                   // stdout and stderr

private:
    pid_t m_pid = -1;
    bool m_exited = false;
    int m_exit_code = -1;
    int m_signal = 0;
    std::filesystem::path m_log;
};

// A scratch database and a temp root holding a plugins directory and a data
// directory; helpers to write hooks, add crawls, run the real crawl_worker and
// look at what it left in the database and the OS. The temp root is removed on
// destruction unless ORCH_KEEP_TEST_DIRS is set.
class CrawlFixture {
public:
    CrawlFixture();

    ScratchDatabase db;
    ScratchDir root; // before everything that lives in it
    std::filesystem::path plugins;
    std::filesystem::path data;

    // `orchestrator add` of `urls` with extra options (--depth 1 ...); returns the crawl id.
    std::string add_crawl(const std::vector<std::string>& urls, const std::vector<std::string>& options = {});
    // http://site.test/1 .. /n
    static std::vector<std::string> site_urls(int n);

    // Writes plugins/<plugin>/<file> (a bash script body; a standard preamble
    // sets $url, $snap and $crawl from the hook arguments).
    std::filesystem::path write_hook(const std::string& plugin, const std::string& file, const std::string& body);
    void write_config(const std::string& plugin, const std::string& json);

    // Environment of every crawl_worker run: no built-in plugins, our plugins
    // dir, a 1 s teardown grace; `extra` on top.
    CrawlEnv env(const CrawlEnv& extra = {}) const;
    std::vector<std::string> argv(const std::string& crawl_id) const;
    std::unique_ptr<CrawlWorkerProcess> start(const std::string& crawl_id, const CrawlEnv& extra = {});
    // Runs crawl_worker to completion; fails the test if it takes longer than `timeout`.
    std::unique_ptr<CrawlWorkerProcess> run(const std::string& crawl_id, const CrawlEnv& extra = {},
                                            std::chrono::milliseconds timeout = std::chrono::seconds(90));

    // First column of the first row of `sql` ("" for NULL or no row).
    std::string scalar(const std::string& sql);
    long count(const std::string& sql) { return std::stol(scalar(sql)); }
    // All rows, each column as text ("" for NULL).
    std::vector<std::vector<std::string>> rows(const std::string& sql);
    void exec(const std::string& sql);
    // `text` quoted as an SQL literal.
    std::string quote(const std::string& text);

    // Live (non-zombie) processes carrying one of the cookies recorded in the
    // process table, or naming the temp root on their command line: "pid cmdline".
    std::vector<std::string> leftover_processes();
    // Polls until leftover_processes() is empty; returns what is still left.
    std::vector<std::string> wait_no_leftovers(std::chrono::milliseconds timeout = std::chrono::seconds(10));

private:
    pqxx::connection& conn();
    std::unique_ptr<pqxx::connection> m_conn;
    int m_runs = 0;
};

// Polls `condition` every 20 ms until it holds or `timeout` passes; returns its last value.
template <typename F>
bool poll_until(F&& condition, std::chrono::milliseconds timeout)
{
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition()) {
            return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        ::usleep(20'000);
    }
}

// Text of a file ("" if absent) and its lines.
std::string read_text(const std::filesystem::path& path);
std::vector<std::string> read_lines(const std::filesystem::path& path);
// Whether `pid` names a live (non-zombie) process.
bool process_alive(pid_t pid);

} // namespace orch::test
