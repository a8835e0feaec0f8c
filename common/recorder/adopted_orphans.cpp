// Supervisor::stop_adopted_orphans: what a destroyed supervisor's trees left
// behind in its care.
#include "common/recorder/supervisor.hpp"

#include "common/base/log.hpp"
#include "common/supervision/process_identity.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

bool all_digits(const std::string& s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Live children of this process (a zombie has nothing left to stop): from each
// thread's children list (an orphan is handed to any thread of its
// subreaper), or from a scan of /proc where the kernel has no such list.
std::vector<pid_t> live_children()
{
    std::vector<pid_t> listed;
    bool have_lists = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream in(task.path() / "children");
        if (!in) {
            continue;
        }
        have_lists = true;
        for (long pid = 0; in >> pid;) {
            listed.push_back(static_cast<pid_t>(pid));
        }
    }
    if (!have_lists) {
        const pid_t self = ::getpid();
        for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
            const auto name = entry.path().filename().string();
            if (!all_digits(name)) {
                continue;
            }
            const auto pid = static_cast<pid_t>(std::stol(name));
            if (const auto stat = read_proc_stat(pid); stat && stat->ppid == self) {
                listed.push_back(pid);
            }
        }
    }
    std::vector<pid_t> out;
    for (pid_t pid : listed) {
        if (const auto stat = read_proc_stat(pid); stat && stat->state != 'Z') {
            out.push_back(pid);
        }
    }
    return out;
}

} // namespace

void Supervisor::stop_adopted_orphans()
{
    if (!m_containment.uses_cgroups()) {
        return;
    }
    const auto adopted = [this] {
        std::vector<pid_t> out;
        for (pid_t pid : live_children()) {
            const bool leader = std::any_of(m_trees.begin(), m_trees.end(), [pid](const auto& entry) {
                return !entry.second->leader_exit() && entry.second->pid() == pid;
            });
            if (!leader && m_containment.holds(pid)) {
                out.push_back(pid);
            }
        }
        return out;
    };
    reap_orphans();
    auto orphans = adopted();
    if (orphans.empty()) {
        return;
    }
    log::warn("stopping processes adopted from dead supervisors", {{"count", std::to_string(orphans.size())}});
    const auto t0 = Clock::now();
    const auto kill_at = t0 + m_options.teardown_grace;
    const auto give_up = kill_at + m_options.kill_timeout;
    std::set<pid_t> termed;
    for (;;) {
        const auto now = Clock::now();
        // Not reaped since adopted() listed them: the pids are still theirs.
        for (pid_t pid : orphans) {
            if (now >= kill_at) {
                ::kill(pid, SIGKILL);
            } else if (termed.insert(pid).second) {
                ::kill(pid, SIGTERM);
                ::kill(pid, SIGCONT);
            }
        }
        if (now >= give_up) {
            log::error("adopted processes survived SIGKILL", {{"count", std::to_string(orphans.size())}});
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        reap_orphans();
        orphans = adopted();
        if (orphans.empty()) {
            log::info("adopted processes gone",
                      {{"count", std::to_string(termed.size())},
                       {"elapsed_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         Clock::now() - t0).count())}});
            return;
        }
    }
}

} // namespace orch
