#include "tests/chaos/invariants.hpp"

#include "tests/chaos/chaos_hooks.hpp"
#include "tests/chaos/db_query.hpp"
#include "tests/chaos/os_scan.hpp"
#include "tests/support/spawned_process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace orch::chaos {

namespace fs = std::filesystem;

namespace {

std::string in_list(const std::vector<std::string>& ids)
{
    std::string out;
    for (const auto& id : ids) {
        out += (out.empty() ? "'" : ",'") + id + "'";
    }
    return out;
}

void check_terminal(const std::string& url, const std::string& crawls, InvariantReport& r)
{
    for (const auto& row : query(url, "SELECT id, status FROM crawl WHERE id IN (" + crawls + ") AND status <> 'sealed'")) {
        r.violations.push_back("terminal: crawl " + row[0] + " is " + row[1]);
    }
    for (const auto& row : query(url, "SELECT count(*), min(status) FROM snapshot WHERE crawl_id IN (" + crawls +
                                          ") AND status <> 'sealed' HAVING count(*) > 0")) {
        r.violations.push_back("terminal: " + row[0] + " snapshot(s) not sealed (e.g. " + row[1] + ")");
    }
    for (const auto& row : query(url, "SELECT count(*), min(a.status) FROM archive_result a JOIN snapshot s ON "
                                      "s.id = a.snapshot_id WHERE s.crawl_id IN (" + crawls + ") AND a.status "
                                      "NOT IN ('succeeded', 'failed', 'skipped', 'noresults') HAVING count(*) > 0")) {
        r.violations.push_back("terminal: " + row[0] + " archive_result(s) not terminal (e.g. " + row[1] + ")");
    }
}

// One run of a hook as its records tell it.
struct HookRun {
    std::string pid;
    std::string url;     // from its start record
    long long start = 0; // epoch ns
    long long end = -1;  // -1: no end record (killed)
};

// The record file of one (snapshot, hook).
struct HookRecords {
    std::string snapshot;
    std::string label;
    std::vector<HookRun> runs;
};

// "on_Snapshot__10_fetch.sh", "10_fetch" and "fetch" all name the records of "fetch".
std::string label_of(const std::string& hook_name)
{
    auto stem = hook_name.substr(0, hook_name.rfind('.'));
    return stem.substr(stem.rfind('_') + 1);
}

// The host of an absolute URL, lower-cased, without user info or port.
std::string host_of(const std::string& url)
{
    auto scheme = url.find("://");
    if (scheme == std::string::npos) {
        return {};
    }
    auto authority = url.substr(scheme + 3, url.find_first_of("/?#", scheme + 3) - (scheme + 3));
    auto at = authority.rfind('@');
    if (at != std::string::npos) {
        authority.erase(0, at + 1);
    }
    authority = authority.substr(0, authority.find(':'));
    std::transform(authority.begin(), authority.end(), authority.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return authority;
}

// Whether the process table knows the earlier, succeeded run `pid` of (snap, label),
// and what its worker became. Empty: no trace at all.
std::string earlier_run_trace(const std::string& url, const std::string& snap, const std::string& label,
                              const std::string& pid, bool& worker_recorded)
{
    worker_recorded = false;
    auto rows = query(url, "SELECT w.exit_code, w.term_signal, w.end_reason FROM process h JOIN process w ON "
                           "w.id = h.parent_id WHERE h.process_type = 'hook' AND h.snapshot_id = '" + snap +
                               "' AND h.pid = " + pid + " AND h.hook_name LIKE '%" + label + "%'");
    if (!rows.empty()) {
        worker_recorded = rows[0][1].empty() && (rows[0][0] == "0" || rows[0][0] == "10");
        return "its worker: exit " + rows[0][0] + " signal " + rows[0][1] + " " + rows[0][2];
    }
    // A quick hook's pid reaches its row with its deferred exit write: a worker
    // killed before that write leaves the row without a pid.
    auto unwritten = query(url, "SELECT w.exit_code, w.term_signal, w.end_reason FROM process h LEFT JOIN process w "
                                "ON w.id = h.parent_id WHERE h.process_type = 'hook' AND h.snapshot_id = '" + snap +
                                    "' AND h.pid IS NULL AND h.hook_name LIKE '%" + label + "%' AND (w.id IS NULL OR "
                                    "w.term_signal IS NOT NULL OR w.exit_code IS NULL OR w.exit_code NOT IN (0, 10))");
    if (!unwritten.empty()) {
        return "its row never got its pid; its worker: exit " + unwritten[0][0] + " signal " + unwritten[0][1] + " " +
               unwritten[0][2];
    }
    return {};
}

// Reads every record file; overlap and rerun are judged in file order (each
// file is appended to by the runs of one (snapshot, hook) as they happen).
std::vector<HookRecords> check_records(const std::string& url, const fs::path& records, InvariantReport& r)
{
    std::vector<HookRecords> out;
    std::error_code ec;
    if (!fs::is_directory(records, ec)) {
        r.violations.push_back("records: no records folder " + records.string() +
                               ": no overlap, rerun or politeness can be judged");
        return out;
    }
    fs::directory_iterator it(records, ec);
    if (ec) {
        r.violations.push_back("records: cannot read " + records.string() + ": " + ec.message());
        return out;
    }
    for (const auto& entry : it) {
        auto name = entry.path().filename().string();
        auto dot = name.find('.');
        if (entry.path().extension() == ".lock" || dot == std::string::npos) {
            continue;
        }
        HookRecords file{name.substr(0, dot), name.substr(dot + 1), {}};
        const auto& snap = file.snapshot;
        const auto& label = file.label;
        std::ifstream in(entry.path());
        std::map<std::string, std::size_t> by_pid;
        std::string last_ok_pid;
        for (std::string line; std::getline(in, line);) {
            std::istringstream ls(line);
            std::string what, pid, run_url;
            long long t = 0;
            ls >> what >> pid >> t >> run_url;
            if (what == "overlap") {
                r.violations.push_back("overlap: " + label + " of snapshot " + snap + " started (pid " + pid +
                                       ") while an earlier run's tree still held its lock");
            } else if (what == "start") {
                if (!last_ok_pid.empty()) {
                    bool recorded = false;
                    auto trace = earlier_run_trace(url, snap, label, last_ok_pid, recorded);
                    auto text = label + " of snapshot " + snap + " ran again (pid " + pid + ") after pid " +
                                last_ok_pid + " succeeded";
                    if (trace.empty()) {
                        r.violations.push_back("rerun: " + text + " (no process row records the earlier run)");
                    } else if (recorded) {
                        r.violations.push_back("rerun: " + text + " (" + trace + ")");
                    } else {
                        r.notes.push_back("at-least-once rerun: " + text + " (" + trace + ")");
                    }
                    last_ok_pid.clear();
                }
                by_pid[pid] = file.runs.size();
                file.runs.push_back({pid, run_url, t, -1});
            } else if (what == "end" && by_pid.count(pid) > 0) {
                file.runs[by_pid[pid]].end = t;
                last_ok_pid = pid;
            }
        }
        // Closed intervals must not intersect; an open one (killed run) only bounds nothing.
        for (std::size_t i = 0; i < file.runs.size(); ++i) {
            for (std::size_t j = i + 1; j < file.runs.size(); ++j) {
                if (file.runs[i].end >= 0 && file.runs[j].start < file.runs[i].end) {
                    r.violations.push_back("overlap: " + label + " of snapshot " + snap + " pid " +
                                           file.runs[j].pid + " started before pid " + file.runs[i].pid + " ended");
                }
            }
        }
        out.push_back(std::move(file));
    }
    return out;
}

// Every succeeded result of the chaos plugin was preceded by its hook's end record.
void check_results_recorded(const std::string& url, const std::string& crawls, const std::vector<HookRecords>& files,
                            InvariantReport& r)
{
    std::set<std::pair<std::string, std::string>> ended;
    for (const auto& f : files) {
        if (std::any_of(f.runs.begin(), f.runs.end(), [](const HookRun& run) { return run.end >= 0; })) {
            ended.emplace(f.snapshot, f.label);
        }
    }
    int missing = 0;
    std::string example;
    for (const auto& row : query(url, "SELECT a.snapshot_id, a.hook_name FROM archive_result a JOIN snapshot s ON "
                                      "s.id = a.snapshot_id WHERE s.crawl_id IN (" + crawls + ") AND a.plugin = '" +
                                          k_chaos_plugin + "' AND a.status = 'succeeded'")) {
        if (ended.count({row[0], label_of(row[1])}) == 0) {
            ++missing;
            example = row[1] + " of snapshot " + row[0];
        }
    }
    if (missing > 0) {
        r.violations.push_back("records: " + std::to_string(missing) +
                               " succeeded result(s) without their hook's end record (e.g. " + example + ")");
    }
}

void check_politeness(const std::vector<HookRecords>& files, const HostRules& rules, InvariantReport& r)
{
    struct Span {
        std::string snapshot;
        long long start;
        long long end;  // -1: open
    };
    std::map<std::string, std::vector<Span>> by_host;
    for (const auto& f : files) {
        for (const auto& run : f.runs) {
            if (run.url.empty()) {
                r.violations.push_back("records: the start record of " + f.label + " of snapshot " + f.snapshot +
                                       " pid " + run.pid + " names no URL");
                continue;
            }
            by_host[host_of(run.url)].push_back({f.snapshot, run.start, run.end});
        }
    }
    for (const auto& [host, spans] : by_host) {
        if (rules.max_per_host > 0) {
            // The count is highest at some run's start.
            std::size_t most = 0;
            long long most_at = 0;
            std::set<std::string> most_snaps;
            for (const auto& at : spans) {
                std::set<std::string> snaps;
                for (const auto& s : spans) {
                    if (s.start <= at.start && (s.end > at.start || (s.end < 0 && s.start == at.start))) {
                        snaps.insert(s.snapshot);
                    }
                }
                if (snaps.size() > most) {
                    most = snaps.size();
                    most_at = at.start;
                    most_snaps = snaps;
                }
            }
            r.most_per_host = std::max(r.most_per_host, static_cast<int>(most));
            if (static_cast<int>(most) > rules.max_per_host) {
                std::string names;
                for (const auto& s : most_snaps) {
                    names += " " + s;
                }
                r.violations.push_back(fmt::format("politeness: {} snapshots of {} ran hooks at once at {} ns "
                                                   "(max_per_host {}):{}",
                                                   most, host, most_at, rules.max_per_host, names));
            }
        }
        if (rules.delay_s > 0 && rules.max_per_host > 0) {
            std::map<std::string, long long> first_start;
            for (const auto& s : spans) {
                auto [it, fresh] = first_start.emplace(s.snapshot, s.start);
                if (!fresh) {
                    it->second = std::min(it->second, s.start);
                }
            }
            std::vector<long long> starts;
            for (const auto& [snap, t] : first_start) {
                starts.push_back(t);
            }
            std::sort(starts.begin(), starts.end());
            const auto n = static_cast<double>(starts.size());
            const double need = (n - 1 - rules.max_per_host) * rules.delay_s - k_spawn_slack_s;
            const double span = starts.empty() ? 0 : static_cast<double>(starts.back() - starts.front()) / 1e9;
            if (starts.size() >= 2 && span < need) {
                r.violations.push_back(fmt::format("politeness: the {} snapshots of {} first started within {:.2f} s; "
                                                   "claims {} s apart (host_delay) take at least {:.2f} s",
                                                   starts.size(), host, span, rules.delay_s, need));
            }
        }
    }
}

void check_os(const TrialSandbox& sandbox, InvariantReport& r)
{
    auto cookies = sandbox.cookies();
    Leftovers left;
    std::vector<std::string> cgroups;
    test::eventually(
        [&] {
            left = scan_leftovers(cookies, sandbox.root().string());
            cgroups = populated_cgroups(sandbox.cgroup_scope());
            return left.alive.empty() && left.zombies.empty() && cgroups.empty();
        },
        std::chrono::seconds(3));
    for (const auto& p : left.alive) {
        r.violations.push_back("leftover: process alive: " + p.substr(0, 200));
    }
    for (const auto& z : left.zombies) {
        r.violations.push_back("leftover: zombie " + z);
    }
    for (const auto& c : cgroups) {
        r.violations.push_back("leftover: populated cgroup " + c);
    }
}

void check_rows(const std::string& url, InvariantReport& r)
{
    for (const auto& row : query(url, "SELECT id, status, coalesce(pid, 0), coalesce(start_ticks, 0), process_type, "
                                      "coalesce(hook_name, worker_type, '') FROM process WHERE status <> 'exited'")) {
        bool alive = row[2] != "0" && same_process_alive(std::stoi(row[2]), std::stoull(row[3]));
        r.violations.push_back("stale_row: " + row[4] + " " + row[5] + " row " + row[0] + " says " + row[1] +
                               (row[2] == "0" ? " (no pid)" : alive ? " (pid " + row[2] + " alive)"
                                                                    : " for dead pid " + row[2]));
    }
}

} // namespace

InvariantReport check_invariants(const TrialSandbox& sandbox, const std::vector<std::string>& crawl_ids,
                                 std::size_t urls_per_crawl, const HostRules& rules)
{
    InvariantReport r;
    const auto& url = sandbox.db_url();
    auto crawls = in_list(crawl_ids);
    check_terminal(url, crawls, r);
    auto files = check_records(url, sandbox.records(), r);
    if (fs::is_directory(sandbox.records())) {
        check_results_recorded(url, crawls, files, r);
    }
    if (rules.max_per_host > 0 || rules.delay_s > 0) {
        check_politeness(files, rules, r);
    }
    check_os(sandbox, r);
    check_rows(url, r);
    // lost: every URL given to `add` has its snapshot (seeds are the crawl's urls[]).
    for (const auto& row : query(url, "SELECT c.id, cardinality(c.urls), (SELECT count(DISTINCT s.url) FROM snapshot s "
                                      "WHERE s.crawl_id = c.id AND s.url = ANY (c.urls)) FROM crawl c WHERE c.id IN (" +
                                          crawls + ")")) {
        if (row[1] != std::to_string(urls_per_crawl) || row[2] != row[1]) {
            r.violations.push_back("lost: crawl " + row[0] + " was given " + std::to_string(urls_per_crawl) +
                                   " URLs, stored " + row[1] + ", has snapshots for " + row[2]);
        }
    }
    return r;
}

} // namespace orch::chaos
