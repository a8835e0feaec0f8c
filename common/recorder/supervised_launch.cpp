#include "common/recorder/supervisor.hpp"

#include "common/supervision/child_environment.hpp"
#include "common/supervision/command_line.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/log.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/recorder/process_table.hpp"
#include "common/base/random_id.hpp"
#include "common/supervision/rerun_script.hpp"

#include <poll.h>

#include <utility>

// Supervisor::launch: a process from its queued row to a tracked tree.
namespace orch {

using Clock = std::chrono::steady_clock;

namespace {

// Where a process's files go: <base>.stdout.log, <base>.stderr.log, <base>.cmd.sh.
std::string file_base(const LaunchRequest& request, const std::string& row_id)
{
    return (request.log_dir / (request.name + "." + row_id)).string();
}

} // namespace

process_table::NewRow Supervisor::queued_row(const LaunchRequest& request, const std::string& row_id,
                                             const std::string& cookie,
                                             const std::map<std::string, std::string>& env) const
{
    const auto base = file_base(request, row_id);
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
    row.containment = std::string(to_string(m_containment.mode()));
    row.stdout_path = base + ".stdout.log";
    row.stderr_path = base + ".stderr.log";
    row.plugin = request.plugin;
    row.hook_name = request.hook_name;
    row.crawl_id = request.crawl_id;
    row.snapshot_id = request.snapshot_id;
    row.archive_result_id = request.archive_result_id;
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
        if (reserved && m_trees.count(result.row_id) == 0) {
            // Its row exists: it must not stay queued for a process that never came.
            hold_unstarted(result.row_id, "spawn_failed", "the launch failed before its spawn");
        }
        throw;
    }
}

LaunchResult Supervisor::launch_row(const LaunchRequest& request, LaunchResult result, const std::string& cookie,
                                    bool reserved)
{
    const auto env = child_environment(request.env, cookie);
    const auto base = file_base(request, result.row_id);
    const std::filesystem::path stdout_path = base + ".stdout.log";
    const std::filesystem::path stderr_path = base + ".stderr.log";
    std::filesystem::create_directories(request.log_dir);

    std::optional<CgroupLeaf> leaf;
    if (!m_spare_leaves.empty()) {
        leaf = std::move(m_spare_leaves.back());
        m_spare_leaves.pop_back();
    } else if (m_containment.uses_cgroups()) {
        leaf = m_containment.create_leaf(m_self_id, result.row_id);
    }
    std::optional<std::string> leaf_path;
    if (leaf) {
        leaf_path = leaf->path().string();
    }
    std::optional<PendingStatement> insert;
    // Hook exits held until now travel with the insert, and are held again
    // if it fails.
    TakenExits carried{*this, {}};
    std::optional<process_table::NewRow> row;
    const auto send_insert = [&] {
        insert.emplace(ride_out(m_conn, [&] { return process_table::send_insert_queued(m_conn, *row, carried.exits); }));
    };
    if (!reserved) {
        row = queued_row(request, result.row_id, cookie, env);
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
    const bool row_first = !(leaf && request.process_type == "hook");
    if (row_first) {
        finish_insert();
    }
    try {
        write_rerun_script(base + ".cmd.sh", request.argv, env, request.pwd, secret_names(env));
    } catch (const std::exception& e) {
        log::warn("cannot write cmd.sh", {{"process", result.row_id}, {"error", e.what()}});
    }

    SpawnSpec spec;
    spec.argv = request.argv;
    auto child_env = env;
    for (const auto& [key, value] : request.private_env) {
        child_env[key] = value;
    }
    if (request.process_type == "worker") {
        // Its row by key (register_self); unrecorded, as a rerun of cmd.sh is a new process.
        child_env[k_process_id_env_var] = result.row_id;
    }
    for (const auto& [key, value] : child_env) {
        spec.envp.push_back(key + "=" + value);
    }
    spec.pwd = request.pwd;
    spec.stdout_path = stdout_path;
    spec.stderr_path = stderr_path;
    spec.cgroup_dir_fd = leaf ? leaf->dir_fd() : -1;
    spec.cgroup_procs_fd = leaf ? leaf->procs_fd() : -1;
    auto spawned = spawn_process(spec);
    if (auto* failure = std::get_if<SpawnFailure>(&spawned)) {
        finish_insert();
        log::warn("spawn failed", {{"process", result.row_id}, {"name", request.name}, {"error", failure->message}});
        process_table::mark_exited(m_conn, result.row_id, {std::nullopt, std::nullopt, "spawn_failed", {}, failure->message});
        result.failure = *failure;
        return result;
    }
    auto& child = std::get<Spawned>(spawned);
    if (!row_first) {
        try {
            finish_insert();
        } catch (const std::exception& e) {
            // No row, no supervision: the hook must not outlive this call.
            log::warn("row not written: stopping the hook", {{"process", result.row_id}, {"error", e.what()}});
            leaf->kill();
            pollfd exited{child.pidfd.fd(), POLLIN, 0};
            ::poll(&exited, 1, static_cast<int>(m_options.kill_timeout.count()));
            child.pidfd.try_reap();
            throw;
        }
    }
    result.pid = child.pidfd.pid();
    ProcessIdentity identity;
    identity.pid = result.pid;
    identity.boot_id = m_boot_id;
    identity.start_ticks = child.start_ticks;
    identity.pidfs_ino = child.pidfd.inode();
    identity.cookie = cookie;
    if (request.process_type == "hook") {
        m_pending_running[result.row_id] =
            PendingRunning{identity, child.pgid, Clock::now(), reserved ? leaf_path : std::nullopt};
    } else {
        process_table::mark_running(m_conn, result.row_id, identity, child.pgid, std::chrono::microseconds(0),
                                    reserved ? leaf_path : std::nullopt);
    }

    SweepTarget sweep{cookie, child.pgid, identity.start_ticks};
    auto tree = std::make_unique<SupervisedTree>(result.row_id, request.name, std::move(child.pidfd), std::move(leaf),
                                                 sweep, request.timeout_s, stdout_path, stderr_path);
    tree->hold_exit = request.process_type == "hook" || request.hold_exit;
    tree->owner_logs = request.owner_logs;
    if (const auto level = request.owner_logs ? log::Level::debug : log::Level::info; log::enabled(level)) {
        log::write(level, "launched",
                   {{"process", result.row_id}, {"name", request.name}, {"pid", std::to_string(result.pid)},
                    {"containment", std::string(to_string(m_containment.mode()))}});
    }
    track(std::move(tree));
    return result;
}

} // namespace orch
