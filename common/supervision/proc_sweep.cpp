#include "common/supervision/proc_sweep.hpp"

#include "common/supervision/pidfd.hpp"
#include "common/supervision/process_identity.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>

#include <csignal>
#include <unistd.h>

namespace orch {
namespace {

bool is_member(pid_t pid, const SweepTarget& target)
{
    const auto stat = read_proc_stat(pid);
    if (!stat || stat->state == 'Z' || stat->start_ticks < target.min_start_ticks) {
        return false;
    }
    if (target.pgid && stat->pgid == *target.pgid) {
        return true;
    }
    return !target.cookie.empty() && read_environ_value(pid, k_cookie_env_var) == target.cookie;
}

std::vector<pid_t> list_pids()
{
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        char* end = nullptr;
        const long pid = std::strtol(name.c_str(), &end, 10);
        if (end != name.c_str() && *end == '\0' && pid > 0) {
            pids.push_back(static_cast<pid_t>(pid));
        }
    }
    return pids;
}

} // namespace

std::vector<pid_t> find_tree_members(const SweepTarget& target)
{
    const pid_t self = ::getpid();
    std::vector<pid_t> members;
    for (pid_t pid : list_pids()) {
        if (pid != self && is_member(pid, target)) {
            members.push_back(pid);
        }
    }
    return members;
}

std::size_t sweep_signal(const SweepTarget& target, int sig, int max_passes)
{
    std::set<std::uint64_t> signalled; // pidfs inodes (or pids) already hit
    std::size_t count = 0;
    for (int pass = 0; pass < max_passes; ++pass) {
        bool found_new = false;
        for (pid_t pid : find_tree_members(target)) {
            auto pidfd = Pidfd::open(pid);
            // Membership is re-checked after the pidfd pins the process, so
            // the signal goes to the process we checked, never a successor.
            if (!pidfd || !is_member(pid, target)) {
                continue;
            }
            const auto key = pidfd->inode().value_or(static_cast<std::uint64_t>(pid));
            if (!signalled.insert(key).second) {
                continue;
            }
            found_new = true;
            if (pidfd->send_signal(sig)) {
                ++count;
            }
            if (sig == SIGTERM) {
                pidfd->send_signal(SIGCONT);
            }
        }
        if (!found_new) {
            break;
        }
    }
    return count;
}

bool sweep_kill_until_empty(const SweepTarget& target, int max_passes)
{
    for (int pass = 0; pass < max_passes; ++pass) {
        const auto members = find_tree_members(target);
        if (members.empty()) {
            return true;
        }
        for (pid_t pid : members) {
            auto pidfd = Pidfd::open(pid);
            if (pidfd && is_member(pid, target)) {
                pidfd->send_signal(SIGKILL);
            }
        }
    }
    return find_tree_members(target).empty();
}

} // namespace orch
