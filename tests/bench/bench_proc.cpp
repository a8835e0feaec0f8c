#include "tests/bench/bench_proc.hpp"

#include <fstream>
#include <optional>
#include <sstream>

namespace orch::bench {

PeakRssSampler::PeakRssSampler(std::filesystem::path bin_dir, std::chrono::milliseconds period)
    : m_bin_dir(std::filesystem::canonical(bin_dir)), m_period(period), m_thread([this] {
          while (!m_stop) {
              scan();
              std::this_thread::sleep_for(m_period);
          }
      })
{
}

PeakRssSampler::~PeakRssSampler()
{
    m_stop = true;
    m_thread.join();
}

long PeakRssSampler::peak_kb(const std::string& program) const
{
    return peak_of(m_peaks, program);
}

long PeakRssSampler::peak_anon_kb(const std::string& program) const
{
    return peak_of(m_anon_peaks, program);
}

long PeakRssSampler::peak_of(const std::map<std::string, long>& peaks, const std::string& program) const
{
    std::lock_guard lock(m_mutex);
    auto it = peaks.find(program);
    return it == peaks.end() ? 0 : it->second;
}

namespace {

// Whether the process at `proc_dir` runs with an argument "add": an orchestrator's
// subcommand (the bench passes no option value spelled so).
bool is_add_command(const std::filesystem::path& proc_dir)
{
    std::ifstream in(proc_dir / "cmdline");
    std::string arg;
    while (std::getline(in, arg, '\0')) {
        if (arg == "add") {
            return true;
        }
    }
    return false;
}

} // namespace

void PeakRssSampler::scan()
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto pid = entry.path().filename().string();
        if (pid.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        std::error_code link_ec;
        const auto exe = std::filesystem::read_symlink(entry.path() / "exe", link_ec);
        if (link_ec || exe.parent_path() != m_bin_dir) {
            continue;
        }
        auto program = exe.filename().string();
        if (program == "orchestrator" && is_add_command(entry.path())) {
            program = "orchestrator add";
        }
        std::ifstream status(entry.path() / "status");
        std::string line;
        while (std::getline(status, line)) {
            // VmHWM comes before RssAnon in the file.
            const bool hwm = line.rfind("VmHWM:", 0) == 0;
            const bool anon = line.rfind("RssAnon:", 0) == 0;
            if (hwm || anon) {
                const long kb = std::atol(line.c_str() + (hwm ? 6 : 8));
                std::lock_guard lock(m_mutex);
                auto& peak = (hwm ? m_peaks : m_anon_peaks)[program];
                peak = std::max(peak, kb);
            }
            if (anon) {
                break;
            }
        }
    }
}

namespace {

// Fields 4 (ppid) and 14 to 17 (utime, stime, cutime, cstime) of /proc/<pid>/stat.
struct StatTimes {
    pid_t ppid = 0;
    long utime = 0, stime = 0, cutime = 0, cstime = 0;
};

std::optional<StatTimes> stat_times(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) {
        return std::nullopt;
    }
    // Fields after "(comm)": state is field 3.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    StatTimes t;
    for (int i = 3; i <= 17 && rest >> field; ++i) {
        switch (i) {
        case 4: t.ppid = static_cast<pid_t>(std::stol(field)); break;
        case 14: t.utime = std::stol(field); break;
        case 15: t.stime = std::stol(field); break;
        case 16: t.cutime = std::stol(field); break;
        case 17: t.cstime = std::stol(field); break;
        default: break;
        }
    }
    return t;
}

} // namespace

long cpu_ticks(pid_t pid)
{
    const auto t = stat_times(pid);
    return t ? t->utime + t->stime : -1;
}

std::optional<SchedCounts> sched_counts(pid_t pid)
{
    SchedCounts out;
    bool any = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream in(task.path() / "schedstat");
        long long on_cpu = 0, waiting = 0, runs = 0;
        if (in >> on_cpu >> waiting >> runs) {
            out.cpu_ns += on_cpu;
            out.runs += runs;
            any = true;
        }
    }
    return any ? std::optional<SchedCounts>(out) : std::nullopt;
}

long server_tree_ticks(pid_t server)
{
    const auto root = stat_times(server);
    if (!root) {
        return -1;
    }
    long total = root->utime + root->stime + root->cutime + root->cstime;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const auto t = stat_times(static_cast<pid_t>(std::stol(name)));
        if (t && t->ppid == server) {
            total += t->utime + t->stime;
        }
    }
    return total;
}

} // namespace orch::bench

namespace orch::bench {

long machine_busy_ticks()
{
    std::ifstream in("/proc/stat");
    std::string cpu;
    long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
    if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") {
        return -1;
    }
    return user + nice + system + irq + softirq;
}

} // namespace orch::bench
