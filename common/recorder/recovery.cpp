#include "common/recorder/recovery.hpp"

#include "common/base/log.hpp"
#include "common/db/machine.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/proc_sweep.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/recorder/process_table.hpp"

#include <csignal>
#include <map>
#include <set>
#include <thread>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

// One orphaned tree to tear down: whatever of it can be found safely.
struct Orphan {
    std::string row_id;          // empty for a leaf whose row is not live
    std::optional<Pidfd> leader; // only when its identity was verified
    std::optional<CgroupLeaf> leaf;
    std::optional<SweepTarget> sweep; // fallback rows with a cookie
    bool found_any = false;
};

// Which live row each process found in a leaf belongs to. A supervisor reuses a
// leaf for its next hook, whose row may not name the leaf yet (its running write
// is held back), while the row that does name it may be a hook that already
// exited (its exit held too): the leaf alone would credit the kill to the wrong
// row. The cookie in a member's environment names its own.
struct Attribution {
    std::map<std::string, std::string> row_by_cookie;
    std::set<std::string> found; // rows a member of some leaf was found for
};

// Credits the leaf member `pid` to the row of its cookie, else to `orphan`.
void credit(pid_t pid, Orphan& orphan, Attribution& attribution)
{
    const auto cookie = read_environ_value(pid, k_cookie_env_var);
    const auto row = cookie ? attribution.row_by_cookie.find(*cookie) : attribution.row_by_cookie.end();
    if (row != attribution.row_by_cookie.end()) {
        attribution.found.insert(row->second);
    } else {
        orphan.found_any = true;
    }
}

bool orphan_empty(const Orphan& orphan)
{
    if (orphan.leader && !orphan.leader->has_exited()) {
        return false;
    }
    if (orphan.leaf && orphan.leaf->populated()) {
        return false;
    }
    return !orphan.sweep || find_tree_members(*orphan.sweep).empty();
}

void signal_orphan(Orphan& orphan, int sig, Attribution& attribution)
{
    if (orphan.leader && orphan.leader->send_signal(sig)) {
        orphan.found_any = true;
    }
    if (orphan.leaf) {
        if (sig == SIGKILL) {
            const auto members = orphan.leaf->members();
            for (pid_t pid : members) {
                credit(pid, orphan, attribution);
            }
            orphan.found_any |= members.empty() && orphan.leaf->populated();
            orphan.leaf->kill();
        } else {
            // A member may exit and its pid be reused between reading
            // cgroup.procs and the open: the pidfd pins whichever process has
            // the pid now, and it is signalled only if that one is in the leaf.
            for (pid_t pid : orphan.leaf->members()) {
                auto pidfd = Pidfd::open(pid);
                if (pidfd && orphan.leaf->contains(pid) && pidfd->send_signal(sig)) {
                    pidfd->send_signal(SIGCONT);
                    credit(pid, orphan, attribution);
                }
            }
        }
    }
    if (orphan.sweep) {
        if (sig == SIGKILL) {
            orphan.found_any |= !find_tree_members(*orphan.sweep).empty();
            sweep_kill_until_empty(*orphan.sweep);
        } else {
            orphan.found_any |= sweep_signal(*orphan.sweep, sig) > 0;
        }
    }
}

// TERM all, wait up to `grace` for all, KILL the rest: in parallel, so the
// whole recovery is bounded by one grace period.
void tear_down(std::vector<Orphan>& orphans, const RecoveryOptions& options, Attribution& attribution)
{
    for (auto& orphan : orphans) {
        signal_orphan(orphan, SIGTERM, attribution);
    }
    auto all_empty = [&] {
        for (const auto& orphan : orphans) {
            if (!orphan_empty(orphan)) {
                return false;
            }
        }
        return true;
    };
    const auto term_deadline = Clock::now() + options.grace;
    while (!all_empty() && Clock::now() < term_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& orphan : orphans) {
        if (!orphan_empty(orphan)) {
            log::info("recovery: SIGKILL orphaned tree", {{"process", orphan.row_id}});
            signal_orphan(orphan, SIGKILL, attribution);
        }
    }
    const auto kill_deadline = Clock::now() + options.kill_timeout;
    while (!all_empty() && Clock::now() < kill_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& orphan : orphans) {
        if (orphan.leaf) {
            orphan.leaf->remove();
        }
    }
}

std::optional<pid_t> pid_of(const process_table::LiveRow& row)
{
    return row.identity ? std::optional<pid_t>(row.identity->pid) : std::nullopt;
}

std::string reason_for(IdentityVerdict verdict)
{
    switch (verdict) {
    case IdentityVerdict::reused: return "pid_reused";
    case IdentityVerdict::boot_changed: return "boot_changed";
    default: return "lost";
    }
}

} // namespace

RecoveryReport cleanup_stale_running(pqxx::connection& conn, const std::string& machine_id,
                                     const RecoveryOptions& options)
{
    RecoveryReport report;
    const auto containment = Containment::probe(options.containment);
    const auto boot_id = read_boot_id();
    const auto rows = process_table::live_rows(conn, machine_id);

    std::map<std::string, VerifiedProcess> verdicts;
    for (const auto& row : rows) {
        if (row.identity) {
            verdicts[row.id] = verify_identity(*row.identity, boot_id);
        }
    }
    auto alive = [&](const std::string& id) {
        if (options.self_row_id && id == *options.self_row_id) {
            return true;
        }
        const auto it = verdicts.find(id);
        return it != verdicts.end() && it->second.verdict == IdentityVerdict::same;
    };

    std::vector<Orphan> orphans;
    struct StaleRow {
        std::string row_id;
        std::string end_reason;
        std::optional<pid_t> pid; // as read: the close applies only to the row we judged
    };
    std::vector<StaleRow> to_close;
    for (const auto& row : rows) {
        if (options.self_row_id && row.id == *options.self_row_id) {
            continue;
        }
        const auto verdict_it = verdicts.find(row.id);
        const auto verdict = verdict_it == verdicts.end() ? IdentityVerdict::gone : verdict_it->second.verdict;
        const bool from_other_boot = verdict == IdentityVerdict::boot_changed;
        const bool supervisor_dead = row.parent_id && !alive(*row.parent_id);
        if (!supervisor_dead || from_other_boot) {
            if (verdict == IdentityVerdict::same || (!row.identity && !supervisor_dead)) {
                ++report.untouched; // alive, or a launch still in flight
                continue;
            }
            to_close.push_back({row.id, reason_for(verdict), pid_of(row)});
            continue;
        }
        // A dead supervisor's process: its tree may live on without it.
        Orphan orphan;
        orphan.row_id = row.id;
        if (verdict == IdentityVerdict::same) {
            orphan.leader = std::move(verdict_it->second.pidfd);
        }
        if (row.cgroup_path && containment.uses_cgroups() && std::filesystem::exists(*row.cgroup_path) &&
            std::filesystem::path(*row.cgroup_path).parent_path().parent_path() == containment.scope_dir()) {
            orphan.leaf = CgroupLeaf::adopt(*row.cgroup_path, containment.mode() == ContainmentMode::freezer
                                                                   ? CgroupLeaf::Kind::freezer
                                                                   : CgroupLeaf::Kind::cgroup2);
        }
        if (row.cookie && !orphan.leaf) {
            const auto min_ticks = row.identity ? row.identity->start_ticks : 0;
            orphan.sweep = SweepTarget{*row.cookie, std::nullopt, min_ticks};
        }
        log::info("recovery: orphaned process of a dead supervisor",
                  {{"process", row.id}, {"verdict", std::string(to_string(verdict))},
                   {"cgroup", row.cgroup_path.value_or("")}});
        orphans.push_back(std::move(orphan));
        to_close.push_back({row.id, reason_for(verdict), pid_of(row)});
    }

    // Leaves of dead supervisors whose hook rows are no longer live (rows
    // closed, crash before the row was written...). Only supervisors known to
    // this database: a directory we cannot attribute is someone else's.
    std::set<std::string> handled;
    for (const auto& orphan : orphans) {
        handled.insert(orphan.row_id);
    }
    for (const auto& group : containment.list_groups()) {
        if (alive(group) || !process_table::status_of(conn, group)) {
            continue;
        }
        for (const auto& leaf : containment.list_leaves(group)) {
            if (handled.count(leaf) == 0) {
                Orphan orphan;
                orphan.row_id = leaf;
                orphan.leaf = containment.adopt_leaf(group, leaf);
                orphans.push_back(std::move(orphan));
            }
        }
    }

    Attribution attribution;
    for (const auto& row : rows) {
        if (row.cookie) {
            attribution.row_by_cookie[*row.cookie] = row.id;
        }
    }
    tear_down(orphans, options, attribution);
    std::map<std::string, bool> killed;
    for (const auto& orphan : orphans) {
        killed[orphan.row_id] = orphan.found_any;
    }
    for (const auto& row_id : attribution.found) {
        killed[row_id] = true;
    }
    for (auto& [row_id, reason, pid] : to_close) {
        if (killed[row_id]) {
            reason = "killed_on_recovery";
        }
        // The rows were read before the teardown's grace: a live supervisor
        // may have recorded a real exit (or a pid) since, which must win.
        if (!process_table::close_stale(conn, row_id, pid, reason)) {
            log::info("recovery: row changed since it was read; left as written",
                      {{"process", row_id}, {"end_reason", reason}});
            continue;
        }
        report.closed_rows.push_back(row_id);
        int& counter = reason == "killed_on_recovery" ? report.killed_on_recovery
                       : reason == "pid_reused"       ? report.pid_reused
                       : reason == "boot_changed"     ? report.boot_changed
                                                      : report.lost;
        ++counter;
        log::info("recovery: closed row", {{"process", row_id}, {"end_reason", reason}});
    }
    for (const auto& group : containment.list_groups()) {
        if (!alive(group) && process_table::status_of(conn, group)) {
            containment.remove_group(group);
        }
    }
    return report;
}

} // namespace orch
