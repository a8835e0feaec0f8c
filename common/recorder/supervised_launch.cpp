#include "common/recorder/supervisor.hpp"

#include "common/base/log.hpp"
#include "common/base/random_id.hpp"
#include "common/db/database_outage.hpp"
#include "common/recorder/process_table.hpp"
#include "common/supervision/child_environment.hpp"
#include "common/supervision/command_line.hpp"
#include "common/supervision/process_identity.hpp"

#include <utility>

// Supervisor::launch: a process from its queued row to a tracked tree.
namespace orch {

using Clock = std::chrono::steady_clock;

process_table::NewRow Supervisor::queued_row(const LaunchRequest& request, const std::string& row_id,
                                             const std::string& cookie,
                                             const std::map<std::string, std::string>& env) const
{
    // The names ProcessTrees gives a tree's files (<log_dir>/<name>.<id>.*).
    const auto base = (request.log_dir / (request.name + "." + row_id)).string();
    process_table::NewRow row;
    row.id = row_id;
    row.machine_id = m_options.machine_id;
    row.parent_id = m_self_id;
    row.process_type = request.process_type;
    row.cmd = redact_command_line(request.argv);
    row.env = redacted(env);
    row.pwd = request.pwd.string();
    row.timeout_s = request.timeout_s;
    row.cookie = cookie;
    row.containment = std::string(to_string(m_trees.containment_mode()));
    row.stdout_path = base + ".stdout.log";
    row.stderr_path = base + ".stderr.log";
    row.plugin = request.labels.plugin;
    row.hook_name = request.labels.hook_name;
    row.crawl_id = request.labels.crawl_id;
    row.snapshot_id = request.labels.snapshot_id;
    row.archive_result_id = request.labels.archive_result_id;
    return row;
}

LaunchResult Supervisor::launch(const LaunchRequest& request)
{
    LaunchResult result;
    result.row_id = request.row_id.empty() ? random_uuid() : request.row_id;
    // A row reserved earlier is already written (queued): no statement here.
    const auto reservation = request.row_id.empty() ? m_reservations.end() : m_reservations.find(request.row_id);
    const bool reserved = reservation != m_reservations.end();
    const std::string cookie = reserved ? reservation->second : random_uuid();
    if (reserved) {
        m_reservations.erase(reservation);
    }
    try {
        return launch_row(request, result, cookie, reserved);
    } catch (...) {
        if (reserved && !m_trees.is_running(result.row_id)) {
            // Its row exists: it must not stay queued for a process that never came.
            hold_unstarted(result.row_id, "spawn_failed", "the launch failed before its spawn");
        }
        throw;
    }
}

LaunchResult Supervisor::launch_row(const LaunchRequest& request, LaunchResult result, const std::string& cookie,
                                    bool reserved)
{
    auto slot = m_trees.prepare(request, result.row_id, cookie);
    const auto leaf_path = slot.cgroup_path();
    std::optional<PendingStatement> insert;
    // Hook exits held until now travel with the insert, and are held again
    // if it fails.
    TakenExits carried{*this, {}};
    std::optional<process_table::NewRow> row;
    const auto send_insert = [&] {
        insert.emplace(ride_out(m_conn, [&] { return process_table::send_insert_queued(m_conn, *row, carried.exits); }));
    };
    if (!reserved) {
        row = queued_row(request, result.row_id, cookie, slot.env());
        row->cgroup_path = leaf_path;
        carried.exits = std::exchange(m_held_exits, {});
        send_insert();
    }
    auto finish_insert = [&] {
        while (insert) {
            try {
                insert->finish();
            } catch (const pqxx::broken_connection& e) {
                // The server broke the insert off: it did not commit. Sent again once it is back.
                insert.reset();
                await_reconnect(m_conn, e);
                send_insert();
                continue;
            }
            insert.reset();
            carried.written();
        }
    };
    // A hook in a cgroup leaf starts while its row commits: the server works
    // on the row while we write cmd.sh, open the log files and the child execs
    // (sent before that work, the insert wakes the server on the idle core).
    // Should we crash before the row commits, the hook is still found: it lives
    // in a leaf of our group, and recovery tears down every leaf of a dead
    // supervisor's group, row or no row (the case a lost asynchronous commit
    // already needs). Every other process gets its row first: without a leaf,
    // only the row's cookie finds a process again; and a worker may register
    // itself before the row would have committed.
    const bool row_first = !(leaf_path && request.process_type == "hook");
    if (row_first) {
        finish_insert();
    }
    std::map<std::string, std::string> unrecorded;
    if (request.process_type == "worker") {
        // Its row by key (register_self); unrecorded, as a rerun of cmd.sh is a new process.
        unrecorded[k_process_id_env_var] = result.row_id;
    }
    auto spawned = m_trees.start(std::move(slot), request, unrecorded);
    if (auto* failure = std::get_if<SpawnFailure>(&spawned)) {
        finish_insert();
        process_table::mark_exited(m_conn, result.row_id, {std::nullopt, std::nullopt, "spawn_failed", {}, failure->message});
        result.failure = *failure;
        return result;
    }
    auto& child = std::get<StartedTree>(spawned);
    if (!row_first) {
        try {
            finish_insert();
        } catch (const std::exception& e) {
            // No row, no supervision: the hook must not outlive this call.
            log::warn("row not written: stopping the hook", {{"process", result.row_id}, {"error", e.what()}});
            child.abandon();
            throw;
        }
    }
    result.pid = child.identity().pid;
    if (request.process_type == "hook") {
        m_pending_running[result.row_id] =
            PendingRunning{child.identity(), child.pgid(), Clock::now(), reserved ? leaf_path : std::nullopt};
    } else {
        process_table::mark_running(m_conn, result.row_id, child.identity(), child.pgid(), std::chrono::microseconds(0),
                                    reserved ? leaf_path : std::nullopt);
    }
    m_trees.track(std::move(child));
    if (request.process_type == "hook" || request.hold_exit) {
        m_holds_exit.insert(result.row_id);
    }
    return result;
}

} // namespace orch
