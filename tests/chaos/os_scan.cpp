#include "tests/chaos/os_scan.hpp"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

namespace orch::chaos {
namespace {

std::string slurp(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

std::optional<ProcInfo> read_proc(pid_t pid)
{
    auto stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (stat.empty() || close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream rest(stat.substr(close + 2));
    ProcInfo p;
    p.pid = pid;
    rest >> p.state >> p.ppid;
    std::string skip;
    // Fields 5..21, then 22 = starttime.
    for (int i = 5; i <= 21; ++i) {
        rest >> skip;
    }
    rest >> p.start_ticks;
    p.cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(p.cmdline.begin(), p.cmdline.end(), '\0', ' ');
    return p;
}

std::vector<pid_t> all_pids()
{
    std::vector<pid_t> out;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
    while (auto* e = ::readdir(dir.get())) {
        std::string name = e->d_name;
        if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
            out.push_back(static_cast<pid_t>(std::stol(name)));
        }
    }
    return out;
}

bool same_process_alive(pid_t pid, unsigned long long start_ticks)
{
    auto p = read_proc(pid);
    return p && p->state != 'Z' && p->state != 'X' && (start_ticks == 0 || p->start_ticks == start_ticks);
}

Leftovers scan_leftovers(const std::vector<std::string>& cookies, const std::string& marker)
{
    std::set<std::string> wanted;
    for (const auto& c : cookies) {
        wanted.insert("ORCH_PROCESS_COOKIE=" + c);
    }
    Leftovers out;
    std::set<pid_t> ours;
    std::vector<ProcInfo> zombies;
    for (pid_t pid : all_pids()) {
        if (pid == ::getpid()) {
            continue;
        }
        auto p = read_proc(pid);
        if (!p) {
            continue;
        }
        if (p->state == 'Z' || p->state == 'X') {
            zombies.push_back(*p);
            continue;
        }
        bool mine = !marker.empty() && p->cmdline.find(marker) != std::string::npos;
        if (!mine && !wanted.empty()) {
            std::istringstream vars(slurp("/proc/" + std::to_string(pid) + "/environ"));
            for (std::string var; !mine && std::getline(vars, var, '\0');) {
                mine = wanted.count(var) > 0;
            }
        }
        if (mine) {
            ours.insert(pid);
            out.alive.push_back(std::to_string(pid) + " " + p->cmdline);
        }
    }
    for (const auto& z : zombies) {
        if (z.ppid == ::getpid() || ours.count(z.ppid) > 0) {
            out.zombies.push_back(std::to_string(z.pid) + " (parent " + std::to_string(z.ppid) + ")");
        }
    }
    return out;
}

std::vector<std::string> populated_cgroups(const std::filesystem::path& dir)
{
    std::vector<std::string> out;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        return out;
    }
    auto check = [&](const std::filesystem::path& d) {
        auto procs = slurp((d / "cgroup.procs").string());
        if (!procs.empty()) {
            std::replace(procs.begin(), procs.end(), '\n', ' ');
            out.push_back(d.string() + ": " + procs);
        }
    };
    check(dir);
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) {
            break;
        }
        if (it->is_directory(ec)) {
            check(it->path());
        }
    }
    return out;
}

Memory read_memory(pid_t pid)
{
    Memory m;
    std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) {
            m.rss_kb = std::stol(line.substr(6));
        } else if (line.rfind("VmHWM:", 0) == 0) {
            m.hwm_kb = std::stol(line.substr(6));
        }
    }
    return m;
}

void kill_leftovers(const std::vector<std::string>& cookies, const std::string& marker)
{
    for (int round = 0; round < 5; ++round) {
        auto left = scan_leftovers(cookies, marker);
        if (left.alive.empty()) {
            return;
        }
        for (const auto& line : left.alive) {
            ::kill(static_cast<pid_t>(std::stol(line)), SIGKILL);
        }
        ::usleep(100'000);
    }
}

} // namespace orch::chaos
