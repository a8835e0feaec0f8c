#include "tests/chaos/invariants.hpp"

#include "tests/chaos/db_query.hpp"
#include "tests/chaos/os_scan.hpp"
#include "tests/support/spawned_process.hpp"

#include <fstream>
#include <map>
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

struct Run {
    std::string pid;
    long long start = 0;
    long long end = -1;  // -1: no end record (killed)
};

void check_records(const std::string& url, const fs::path& records, InvariantReport& r)
{
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(records, ec)) {
        auto name = entry.path().filename().string();
        if (entry.path().extension() == ".lock") {
            continue;
        }
        auto dot = name.find('.');
        auto snap = name.substr(0, dot);
        auto label = name.substr(dot + 1);
        std::ifstream in(entry.path());
        std::vector<Run> runs;
        std::map<std::string, std::size_t> by_pid;
        std::string last_ok_pid;
        for (std::string line; std::getline(in, line);) {
            std::istringstream ls(line);
            std::string what, pid;
            long long t = 0;
            ls >> what >> pid >> t;
            if (what == "overlap") {
                r.violations.push_back("overlap: " + label + " of snapshot " + snap + " started (pid " + pid +
                                       ") while an earlier run's tree still held its lock");
            } else if (what == "start") {
                if (!last_ok_pid.empty()) {
                    // Did the earlier run's worker live to record that success?
                    auto rows = query(url, "SELECT w.exit_code, w.term_signal, w.end_reason FROM process h JOIN "
                                           "process w ON w.id = h.parent_id WHERE h.process_type = 'hook' AND "
                                           "h.snapshot_id = '" + snap + "' AND h.pid = " + last_ok_pid +
                                           " AND h.hook_name LIKE '%" + label + "%'");
                    bool normal = !rows.empty() && rows[0][1].empty() &&
                                  (rows[0][0] == "0" || rows[0][0] == "10");
                    (normal ? r.violations : r.notes)
                        .push_back(std::string(normal ? "rerun: " : "at-least-once rerun: ") + label +
                                   " of snapshot " + snap + " ran again (pid " + pid + ") after pid " + last_ok_pid +
                                   " succeeded" +
                                   (rows.empty() ? " (no row)"
                                                 : " (its worker: exit " + rows[0][0] + " signal " + rows[0][1] +
                                                       " " + rows[0][2] + ")"));
                    last_ok_pid.clear();
                }
                by_pid[pid] = runs.size();
                runs.push_back({pid, t, -1});
            } else if (what == "end" && by_pid.count(pid) > 0) {
                runs[by_pid[pid]].end = t;
                last_ok_pid = pid;
            }
        }
        // Closed intervals must not intersect; an open one (killed run) only bounds nothing.
        for (std::size_t i = 0; i < runs.size(); ++i) {
            for (std::size_t j = i + 1; j < runs.size(); ++j) {
                if (runs[i].end >= 0 && runs[j].start < runs[i].end) {
                    r.violations.push_back("overlap: " + label + " of snapshot " + snap + " pid " + runs[j].pid +
                                           " started before pid " + runs[i].pid + " ended");
                }
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
                                 std::size_t urls_per_crawl)
{
    InvariantReport r;
    const auto& url = sandbox.db_url();
    auto crawls = in_list(crawl_ids);
    check_terminal(url, crawls, r);
    check_records(url, sandbox.records(), r);
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
