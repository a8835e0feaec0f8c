#pragma once

#include "tests/support/proc_state.hpp"
#include "tests/support/scratch_archive.hpp"

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

// A scratch archive (database, plugins and data directories, its hooks and
// crawls) with helpers to run the real crawl_worker and look at what it left
// in the database and the OS.
class CrawlFixture : public ScratchArchive {
public:
    CrawlFixture();

    // http://site.test/1 .. /n
    static std::vector<std::string> site_urls(int n);

    // Environment of every crawl_worker run: no built-in plugins, our plugins
    // dir, a 1 s teardown grace; `extra` on top.
    CrawlEnv env(const CrawlEnv& extra = {}) const;
    std::vector<std::string> argv(const std::string& crawl_id) const;
    std::unique_ptr<CrawlWorkerProcess> start(const std::string& crawl_id, const CrawlEnv& extra = {});
    // Runs crawl_worker to completion; fails the test if it takes longer than `timeout`.
    std::unique_ptr<CrawlWorkerProcess> run(const std::string& crawl_id, const CrawlEnv& extra = {},
                                            std::chrono::milliseconds timeout = std::chrono::seconds(90));

    // Live processes of any process row, or naming the temp root: our_processes().
    std::vector<std::string> leftover_processes() { return our_processes(); }

private:
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

} // namespace orch::test
