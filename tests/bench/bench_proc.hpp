#pragma once

// /proc readings for the end-to-end benchmark: peak RSS of running programs
// (sampled, since the programs come and go) and CPU time of processes.

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <sys/types.h>

namespace orch::bench {

// While alive, scans /proc every `period` for processes whose executable is in
// `bin_dir` and keeps the largest VmHWM (peak resident set) seen per program
// name. Programs of other builds (same names, other directories) are ignored.
// An `orchestrator add` (the one-shot command that queues a crawl, not the
// supervisor) is kept apart, as the program "orchestrator add".
class PeakRssSampler {
public:
    PeakRssSampler(std::filesystem::path bin_dir, std::chrono::milliseconds period);
    ~PeakRssSampler();
    PeakRssSampler(const PeakRssSampler&) = delete;
    PeakRssSampler& operator=(const PeakRssSampler&) = delete;

    // Largest VmHWM in kB seen for `program` (0 if never seen).
    long peak_kb(const std::string& program) const;
    // Largest RssAnon in kB seen for `program` at a sample (0 if never seen): its
    // own heap and stacks. The rest of its RSS is file pages (its binary's and the
    // shared libraries' text and data), counted whole in every process mapping them.
    long peak_anon_kb(const std::string& program) const;

private:
    void scan();
    long peak_of(const std::map<std::string, long>& peaks, const std::string& program) const;
    std::filesystem::path m_bin_dir;
    std::chrono::milliseconds m_period;
    mutable std::mutex m_mutex;
    std::map<std::string, long> m_peaks;
    std::map<std::string, long> m_anon_peaks;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

// utime + stime of `pid` in clock ticks (-1 if it is gone).
long cpu_ticks(pid_t pid);

// What the scheduler counted for `pid`'s live threads (/proc/PID/task/*/schedstat):
// time on a CPU in ns, and how many times a thread was put on one (once per
// wake-up from any blocking call: a poll() timeout, a database reply).
// Nanoseconds, where clock ticks (10 ms) cannot resolve an idle daemon's CPU.
// nullopt if it is gone or the kernel keeps no schedstat.
struct SchedCounts {
    long long cpu_ns = 0;
    long long runs = 0;
};
std::optional<SchedCounts> sched_counts(pid_t pid);

// CPU of a server that forks a child per connection (the PostgreSQL
// postmaster): its own and its reaped children's (cutime, cstime) plus that of
// its live children, in clock ticks (-1 if it is gone). A child that exits moves
// from the second term into the first, so the delta over a run is what the
// server spent in it, connections that came and went included.
long server_tree_ticks(pid_t server);

// CPU time the whole machine spent busy (user, nice, system, irq, softirq; not
// idle, iowait or steal), in clock ticks, from /proc/stat (-1 if unreadable).
// Over a run that has the machine to itself, the delta is what the run cost in
// CPU, a steadier figure than its wall time on a shared VM.
long machine_busy_ticks();

} // namespace orch::bench
