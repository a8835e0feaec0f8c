#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace orch::chaos {

// What /proc says about one process.
struct ProcInfo {
    pid_t pid = 0;
    pid_t ppid = 0;
    char state = '?';             // R S D T Z ...; '?' when gone
    unsigned long long start_ticks = 0;
    std::string cmdline;          // NULs turned into spaces
};

std::optional<ProcInfo> read_proc(pid_t pid);
std::vector<pid_t> all_pids();
// Whether `pid` is alive and still the process that started at `start_ticks` (0 = any).
bool same_process_alive(pid_t pid, unsigned long long start_ticks);

// Processes of one trial, found from the OS only: any process whose environment
// carries one of `cookies` (ORCH_PROCESS_COOKIE values) or whose command line
// mentions `marker` (the trial's root directory). Zombies are listed separately.
struct Leftovers {
    std::vector<std::string> alive;    // "pid cmdline"
    std::vector<std::string> zombies;  // "pid ppid" of zombies whose parent is a trial process or us
};
Leftovers scan_leftovers(const std::vector<std::string>& cookies, const std::string& marker);

// Cgroup leaves under `dir` (recursively) that still hold a process: "path: pids".
std::vector<std::string> populated_cgroups(const std::filesystem::path& dir);

// VmRSS and VmHWM of `pid` in kB (0 when unreadable).
struct Memory {
    long rss_kb = 0;
    long hwm_kb = 0;
};
Memory read_memory(pid_t pid);

// SIGKILLs every process scan_leftovers() lists (cleanup after a failed trial).
void kill_leftovers(const std::vector<std::string>& cookies, const std::string& marker);

} // namespace orch::chaos
