#pragma once

#include <sys/types.h>
#include <time.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch::test {

// Environment changes for a child: a value sets the variable (the empty string
// included), nullopt unsets it. Everything else is inherited from the test.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

// A program started in the background by a test, with stdout/stderr captured in
// temporary files. For concurrent runs, signals sent mid-run and memory
// measurement; run_command() is simpler for run-to-completion. The destructor
// SIGKILLs and reaps a child still running and removes the capture files.
class SpawnedProcess {
public:
    // Throws std::runtime_error when fork/exec fails.
    SpawnedProcess(const std::vector<std::string>& argv, const EnvChanges& env = {});
    ~SpawnedProcess();
    SpawnedProcess(const SpawnedProcess&) = delete;
    SpawnedProcess& operator=(const SpawnedProcess&) = delete;

    pid_t pid() const { return m_pid; }
    // Polls (every 20 ms) until the child exits or `timeout` passes; true when it
    // exited. While polling, records the child's peak resident set (VmHWM).
    bool wait_for(std::chrono::milliseconds timeout);
    bool exited() const { return m_exited; }
    void signal(int sig) const;

    int exit_code() const { return m_exit_code; }  // -1 unless it exited normally
    int term_signal() const { return m_signal; }   // 0 unless killed by a signal
    std::string out() const;
    std::string err() const;
    // Largest VmHWM seen while polling, in kB (0 if never sampled).
    long peak_rss_kb() const { return m_peak_rss_kb; }

private:
    void sample_rss();
    pid_t m_pid = -1;
    bool m_exited = false;
    int m_exit_code = -1;
    int m_signal = 0;
    long m_peak_rss_kb = 0;
    std::filesystem::path m_out;
    std::filesystem::path m_err;
};

// Polls `condition` every 20 ms until it holds or `timeout` passes; returns its last value.
template <typename F>
bool eventually(F&& condition, std::chrono::milliseconds timeout)
{
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition()) {
            return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        struct timespec ts{0, 20'000'000};
        ::nanosleep(&ts, nullptr);
    }
}

} // namespace orch::test
