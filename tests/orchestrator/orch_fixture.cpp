#include "tests/orchestrator/orch_fixture.hpp"

#include "tests/support/db_query.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace orch::test {
namespace {

namespace fs = std::filesystem;

} // namespace

std::string read_file_text(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

double cpu_seconds(pid_t pid)
{
    auto stat = read_file_text("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) {
        return -1;
    }
    // After ") ": field 3 (state) onwards; utime and stime are fields 14 and 15.
    std::istringstream in(stat.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i >= 14) {
            ticks += std::stod(field);
        }
    }
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string describe(const SpawnedProcess& p)
{
    auto err = p.err();
    if (err.size() > 6000) {
        err = "..." + err.substr(err.size() - 6000);
    }
    return "exit " + std::to_string(p.exit_code()) + " signal " + std::to_string(p.term_signal()) + "\n" + err;
}

OrchFixture::OrchFixture() : ScratchArchive("orch-or-"), hook_log(root / "hooks.log") {}

std::vector<std::string> OrchFixture::site_urls(int n, const std::string& prefix)
{
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) {
        out.push_back(prefix + std::to_string(i));
    }
    return out;
}

void OrchFixture::write_logging_hook(const std::string& plugin, const std::string& file, double seconds,
                                     const std::string& middle)
{
    auto log = "'" + hook_log.string() + "'";
    write_hook(plugin, file,
               "echo \"$snap " + plugin + " $$ start $EPOCHREALTIME\" >> " + log + "\n" +
                   (middle.empty() ? "sleep " + std::to_string(seconds) + "\n" : middle) + "echo \"$snap " + plugin +
                   " $$ end $EPOCHREALTIME\" >> " + log + "\n" +
                   "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"" + plugin + "\"}'\n");
}

std::vector<HookRun> OrchFixture::hook_runs() const
{
    std::map<std::pair<std::string, int>, HookRun> by_pid; // (hook, pid): pids are not reused within a test
    std::istringstream in(read_file_text(hook_log));
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        HookRun run;
        std::string what;
        std::string when;
        if (!(fields >> run.snapshot >> run.hook >> run.pid >> what >> when)) {
            continue;
        }
        auto& r = by_pid[{run.hook + " " + run.snapshot, run.pid}];
        r.snapshot = run.snapshot;
        r.hook = run.hook;
        r.pid = run.pid;
        if (what == "start") {
            r.start = std::stod(when);
        } else {
            r.end = std::stod(when);
        }
    }
    std::vector<HookRun> out;
    for (auto& [key, run] : by_pid) {
        out.push_back(run);
    }
    return out;
}

EnvChanges OrchFixture::env(const EnvChanges& extra) const
{
    EnvChanges e = {{"ORCH_BUILTIN_PLUGINS_DIR", ""},
                    {"PLUGINS_DIR", plugins.string()},
                    {"TEARDOWN_GRACE", "1"},
                    {"DATABASE_URL", std::nullopt},
                    {"DATA_DIR", std::nullopt},
                    {"MACHINE_ID", std::nullopt},
                    {"MAX_CRAWL_WORKERS", std::nullopt},
                    {"MAX_SNAPSHOT_WORKERS", std::nullopt},
                    {"STOP_GRACE", std::nullopt},
                    {"LEASE_TTL", std::nullopt},
                    {"SNAPSHOT_MAX_ATTEMPTS", std::nullopt},
                    {"ORCH_PROCESS_COOKIE", std::nullopt},
                    {"ORCH_PROCESS_ID", std::nullopt},
                    {"NOTIFY_SOCKET", std::nullopt}};
    for (const auto& [k, v] : extra) {
        e[k] = v;
    }
    return e;
}

std::vector<std::string> OrchFixture::argv(const std::vector<std::string>& options, const std::string& machine_id,
                                           const fs::path& data_dir) const
{
    std::vector<std::string> out = {bin_path("orchestrator").string(), "--database-url", db.url(), "--data-dir",
                                    data_dir.string(), "--machine-id", machine_id};
    out.insert(out.end(), options.begin(), options.end());
    return out;
}

std::unique_ptr<SpawnedProcess> OrchFixture::start(const std::vector<std::string>& options,
                                                   const std::string& machine_id,
                                                   const std::optional<fs::path>& data_dir, const EnvChanges& extra)
{
    auto dir = data_dir.value_or(data);
    fs::create_directories(dir);
    return std::make_unique<SpawnedProcess>(argv(options, machine_id, dir), env(extra));
}

std::unique_ptr<SpawnedProcess> OrchFixture::run(const std::vector<std::string>& options,
                                                 const std::string& machine_id, std::chrono::milliseconds timeout)
{
    auto p = start(options, machine_id);
    bool done = p->wait_for(timeout);
    INFO(describe(*p));
    REQUIRE(done);
    return p;
}

bool OrchFixture::wait_registered(pid_t pid, std::chrono::milliseconds timeout)
{
    return eventually(
        [&] {
            return count("SELECT count(*) FROM process WHERE process_type = 'orchestrator' AND status = 'running' "
                         "AND pid = " + std::to_string(pid)) == 1;
        },
        timeout);
}

long overlapping_process_rows(OrchFixture& f, const std::string& where, const std::string& key)
{
    return f.count("WITH r AS (SELECT id, " + key + " AS k, tstzrange(started_at, coalesce(ended_at, 'infinity')) AS t "
                   "  FROM process WHERE " + where + " AND started_at IS NOT NULL) "
                   "SELECT count(*) FROM r a JOIN r b ON a.k = b.k AND a.id < b.id AND a.t && b.t");
}

long overlapping_hook_runs(const std::vector<HookRun>& runs)
{
    long n = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        for (std::size_t j = 0; j < runs.size(); ++j) {
            const auto& a = runs[i];
            const auto& b = runs[j];
            if (i == j || a.snapshot != b.snapshot || a.hook != b.hook || a.start > b.start) {
                continue;
            }
            // b started while a was still running. A killed run logged no end: the
            // process rows of hooks (overlapping_process_rows) cover those.
            if (a.end && b.start < *a.end) {
                ++n;
            }
        }
    }
    return n;
}

} // namespace orch::test
