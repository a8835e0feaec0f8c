#include "tests/support/proc_state.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

namespace orch::test {
namespace {

std::string read_proc_file(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The state letter after the command name, which may itself hold ')' and
// spaces: hence the last ')'. '?' when unreadable.
char proc_state(pid_t pid)
{
    auto stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) {
        return '?';
    }
    return stat[close + 2];
}

} // namespace

bool process_alive(pid_t pid)
{
    char state = proc_state(pid);
    return state != '?' && state != 'Z' && state != 'X';
}

std::vector<std::string> processes_marked(const std::vector<std::string>& cookie_vars, const std::string& marker)
{
    std::vector<std::string> out;
    std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
    while (auto* entry = ::readdir(proc.get())) {
        std::string name = entry->d_name;
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) {
            continue;
        }
        pid_t pid = std::stoi(name);
        if (pid == ::getpid() || !process_alive(pid)) {
            continue;
        }
        auto cmdline = read_proc_file("/proc/" + name + "/cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        bool marked = !marker.empty() && cmdline.find(marker) != std::string::npos;
        std::istringstream vars(read_proc_file("/proc/" + name + "/environ"));
        for (std::string var; !marked && std::getline(vars, var, '\0');) {
            marked = std::find(cookie_vars.begin(), cookie_vars.end(), var) != cookie_vars.end();
        }
        if (marked) {
            out.push_back(name + " " + cmdline);
        }
    }
    return out;
}

} // namespace orch::test
