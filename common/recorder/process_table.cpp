#include "common/db/database_outage.hpp"
#include "common/recorder/process_table.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/db/pending_statement.hpp"
#include "common/base/json_text.hpp"
#include "common/recorder/process_row_values.hpp"

#include <nlohmann/json.hpp>

namespace orch::process_table {

// Process-row bookkeeping (a hook's queued/running/exited transitions) commits
// without waiting for the WAL flush: three fsync waits per hook were most of
// a hook's supervision cost. The trade-off, on a database crash (never on a
// crash of ours: a committed row is visible at once and survives our death):
//  - WAL is sequential, so the next synchronous commit on the server (the
//    snapshot worker's archive_result update right after mark_running, any
//    lease write) makes every earlier bookkeeping commit durable too; what can be
//    lost is the last ~wal_writer_delay (200 ms) of process rows before the crash;
//  - a lost 'queued'/'running' row leaves a process without a row. It still runs
//    in its supervisor's cgroup leaf (or carries its cookie), and its supervisor's
//    own row was committed synchronously at registration, so the cgroup/cookie
//    sweep of recovery (cleanup_stale_running) tears the tree down;
//  - a lost 'exited' update leaves a row running whose process is gone: recovery
//    closes it as 'lost' (exit code unknown; the result in archive_result, made
//    durable by the synchronous seal of its snapshot, keeps the outcome).
// Rows a caller needs durable before acting on them (a worker's own row, leases)
// are not written through these functions.
//
// Each transition is one prepared statement in autocommit (exec_autocommit).

namespace {

// argv and environment values are bytes, not necessarily UTF-8: a strict dump
// would throw, and the insert carrying held exits with it would be lost.
// json_text replaces what is not UTF-8, as nlohmann's lenient dump does.
std::string json_array(const std::vector<std::string>& items)
{
    std::string out;
    json_text::append_string_array(out, items);
    return out;
}

std::string json_object(const std::map<std::string, std::string>& items)
{
    std::string out;
    json_text::append_string_object(out, items);
    return out;
}

} // namespace

// Every insert of a process row: the row's id is made by the writer, fresh, so
// the only row that can already hold it is the writer's own, committed by an
// earlier try whose reply was lost with the connection (ride_out runs the insert
// again). It stands; without this the retry failed on the key.
constexpr const char* k_insert_once = " ON CONFLICT (id) DO NOTHING";

PendingStatement send_insert_queued(pqxx::connection& conn, const NewRow& row, const std::vector<HeldExit>& exits)
{
    // The exits are written by key (exits_ctes): the insert runs on every launch
    // on a long-lived connection, where a JSON join's plan cached while the table
    // was young hashed a sequential scan of it (0.55 ms per launch at 2k rows,
    // growing with the table until autovacuum's next analyse replans it).
    static const auto sql = exits_variants([](std::size_t count) {
        return with_exits(count, 19,
                          "INSERT INTO process (id, machine_id, parent_id, process_type, status, cmd, env, pwd,"
                          " timeout_s, cookie, containment, cgroup_path, stdout_path, stderr_path, plugin, hook_name,"
                          " crawl_id, snapshot_id, archive_result_id)"
                          " SELECT $1::uuid, $2::text, $3::uuid, $4::text, 'queued', $5::jsonb, $6::jsonb, $7::text,"
                          " $8::double precision, $9::text, $10::text, $11::text, $12::text, $13::text, $14::text,"
                          " $15::text, $16::uuid, $17::uuid, $18::uuid FROM " +
                              std::string(k_async_commit) + k_insert_once);
    });
    std::vector<std::optional<std::string>> params{
        row.id,          row.machine_id,  row.parent_id,   row.process_type,           json_array(row.cmd),
        json_object(row.env),   row.pwd,         text(row.timeout_s),        row.cookie,
        row.containment, row.cgroup_path, row.stdout_path, row.stderr_path,            row.plugin,
        row.hook_name,   row.crawl_id,    row.snapshot_id, row.archive_result_id};
    const auto more = exits_parameters(exits);
    params.insert(params.end(), more.begin(), more.end());
    return PendingStatement(conn, "process_table.insert_queued." + exits_variant_name(exits.size()),
                            sql[exits_variant(exits.size())], std::move(params));
}

PendingStatement send_insert_queued_rows(pqxx::connection& conn, const std::vector<NewRow>& rows)
{
    // No join against the table: the plan is the same whatever its statistics.
    static const std::string sql =
        "INSERT INTO process (id, machine_id, parent_id, process_type, status, cmd, env, pwd,"
        " timeout_s, cookie, containment, cgroup_path, stdout_path, stderr_path, plugin, hook_name,"
        " crawl_id, snapshot_id, archive_result_id)"
        " SELECT r.id, r.machine_id, r.parent_id, r.process_type, 'queued', r.cmd, r.env, r.pwd,"
        " r.timeout_s, r.cookie, r.containment, r.cgroup_path, r.stdout_path, r.stderr_path, r.plugin,"
        " r.hook_name, r.crawl_id, r.snapshot_id, r.archive_result_id"
        " FROM jsonb_to_recordset($1::jsonb) AS r(id uuid, machine_id text, parent_id uuid, process_type text,"
        "   cmd jsonb, env jsonb, pwd text, timeout_s double precision, cookie text, containment text,"
        "   cgroup_path text, stdout_path text, stderr_path text, plugin text, hook_name text, crawl_id uuid,"
        "   snapshot_id uuid, archive_result_id uuid), " + std::string(k_async_commit) + k_insert_once;
    // Written as text (json_text): building and dumping the nlohmann tree of
    // these rows was the largest CPU cost of a snapshot worker.
    std::string out = "[";
    for (const auto& row : rows) {
        out += out.size() > 1 ? ",{" : "{";
        for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"id", &row.id},
                                         {"machine_id", &row.machine_id},
                                         {"process_type", &row.process_type}}) {
            json_text::append_key(out, key);
            json_text::append_string(out, *value);
            out += ',';
        }
        for (const auto& [key, value] : {std::pair<const char*, const std::optional<std::string>*>{
                                             "parent_id", &row.parent_id},
                                         {"pwd", &row.pwd},
                                         {"cookie", &row.cookie},
                                         {"containment", &row.containment},
                                         {"cgroup_path", &row.cgroup_path},
                                         {"stdout_path", &row.stdout_path},
                                         {"stderr_path", &row.stderr_path},
                                         {"plugin", &row.plugin},
                                         {"hook_name", &row.hook_name},
                                         {"crawl_id", &row.crawl_id},
                                         {"snapshot_id", &row.snapshot_id},
                                         {"archive_result_id", &row.archive_result_id}}) {
            json_text::append_key(out, key);
            json_text::append_string_or_null(out, *value);
            out += ',';
        }
        json_text::append_key(out, "cmd");
        json_text::append_string_array(out, row.cmd);
        out += ',';
        json_text::append_key(out, "env");
        json_text::append_string_object(out, row.env);
        out += ',';
        json_text::append_key(out, "timeout_s");
        if (row.timeout_s) {
            json_text::append_number(out, *row.timeout_s);
        } else {
            out += "null";
        }
        out += '}';
    }
    out += ']';
    return PendingStatement(conn, "process_table.insert_queued_rows", sql, {std::move(out)});
}

void insert_running(pqxx::connection& conn, const NewRow& row, const ProcessIdentity& identity, pid_t pgid)
{
    // A process registering itself: durable before it acts (synchronous commit).
    const std::string cmd = json_array(row.cmd);
    const std::string env = json_object(row.env);
    const auto timeout_s = text(row.timeout_s);
    const auto pidfs_ino = text(identity.pidfs_ino);
    ride_out_transaction(conn, [&](pqxx::work& tx) {
        tx.exec_params0(
            "INSERT INTO process (id, machine_id, parent_id, process_type, status, cmd, env, pwd, timeout_s, cookie,"
            " containment, cgroup_path, stdout_path, stderr_path, plugin, hook_name, crawl_id, snapshot_id,"
            " archive_result_id, started_at, heartbeat_at, pid, boot_id, start_ticks, pidfs_ino, pgid)"
            " VALUES ($1::uuid, $2::text, $3::uuid, $4::text, 'running', $5::jsonb, $6::jsonb, $7::text,"
            " $8::double precision, $9::text, $10::text, $11::text, $12::text, $13::text, $14::text, $15::text,"
            " $16::uuid, $17::uuid, $18::uuid, now(), now(), $19, $20, $21, $22, $23)" +
                std::string(k_insert_once),
            row.id, row.machine_id, param(row.parent_id), row.process_type, cmd, env, param(row.pwd),
            param(timeout_s), param(row.cookie), param(row.containment), param(row.cgroup_path), param(row.stdout_path),
            param(row.stderr_path), param(row.plugin), param(row.hook_name), param(row.crawl_id), param(row.snapshot_id),
            param(row.archive_result_id), identity.pid, identity.boot_id, std::to_string(identity.start_ticks),
            param(pidfs_ino), pgid);
    });
}

void mark_running(pqxx::connection& conn, const std::string& id, const ProcessIdentity& identity, pid_t pgid,
                  std::chrono::microseconds since_spawn, const std::optional<std::string>& cgroup_path)
{
    const auto pidfs_ino = text(identity.pidfs_ino);
    exec_autocommit(conn, "process_table.mark_running",
                    std::string("UPDATE process SET status = 'running',"
                                " started_at = now() - make_interval(secs => $7), heartbeat_at = now(),"
                                " pid = $2, boot_id = $3, start_ticks = $4, pidfs_ino = $5, pgid = $6,"
                                " cgroup_path = coalesce($8, cgroup_path) FROM ") +
                    k_async_commit + " WHERE id = $1",
                    id, identity.pid, identity.boot_id, std::to_string(identity.start_ticks), param(pidfs_ino),
                    pgid, static_cast<double>(since_spawn.count()) / 1e6, param(cgroup_path));
}

PendingStatement send_mark_exited(pqxx::connection& conn, const std::string& id, const EndRecord& end)
{
    const auto exit_code = text(end.exit_code);
    const auto term_signal = text(end.term_signal);
    const auto user_s = usage_text(end.usage, &ResourceUsage::user_s);
    const auto system_s = usage_text(end.usage, &ResourceUsage::system_s);
    return send_autocommit(conn, "process_table.mark_exited",
                    std::string("UPDATE process SET status = 'exited', ended_at = COALESCE(ended_at, now()),"
                                " exit_code = COALESCE($2::integer, exit_code),"
                                " term_signal = COALESCE($3::integer, term_signal), end_reason = $4,"
                                " stdout_tail = COALESCE($5, stdout_tail), stderr_tail = COALESCE($6, stderr_tail),"
                                " cpu_user_s = COALESCE($7::double precision, cpu_user_s),"
                                " cpu_system_s = COALESCE($8::double precision, cpu_system_s)"
                                " FROM ") +
                    k_async_commit + " WHERE id = $1",
                    id, param(exit_code), param(term_signal), end.end_reason, param(end.stdout_tail),
                    param(end.stderr_tail), param(user_s), param(system_s));
}

void mark_exited(pqxx::connection& conn, const std::string& id, const EndRecord& end)
{
    ride_out(conn, [&] { send_mark_exited(conn, id, end).finish(); });
}

bool close_stale(pqxx::connection& conn, const std::string& id, std::optional<pid_t> pid,
                 const std::string& end_reason)
{
    const auto pid_text = text(pid);
    const auto result = exec_autocommit(conn, "process_table.close_stale",
                                        "UPDATE process SET status = 'exited', ended_at = now(), end_reason = $3"
                                        " WHERE id = $1 AND status <> 'exited' AND pid IS NOT DISTINCT FROM $2::integer",
                                        id, param(pid_text), end_reason);
    return result.affected_rows() == 1;
}

void heartbeat(pqxx::connection& conn, const std::vector<std::string>& ids)
{
    if (ids.empty()) {
        return;
    }
    ride_out_transaction(conn, [&](pqxx::work& tx) {
        // By key, not through process_live_idx (see the claim's `pointed` in snapshot_claims.cpp).
        tx.exec_params0("UPDATE process SET heartbeat_at = now() WHERE (status <> 'exited') IS TRUE "
                        "AND id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid)",
                        nlohmann::json(ids).dump());
    });
}

std::vector<LiveRow> live_rows(pqxx::connection& conn, const std::string& machine_id)
{
    const auto result = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params("SELECT id, parent_id, process_type, status, pid, boot_id, start_ticks,"
                              " pidfs_ino, cookie, cgroup_path, pgid FROM process WHERE machine_id = $1"
                              " AND status <> 'exited' ORDER BY created_at",
                              machine_id);
    });
    std::vector<LiveRow> rows;
    for (const auto& r : result) {
        LiveRow row;
        row.id = r[0].as<std::string>();
        row.parent_id = get<std::string>(r[1]);
        row.process_type = r[2].as<std::string>();
        row.status = r[3].as<std::string>();
        row.cookie = get<std::string>(r[8]);
        row.cgroup_path = get<std::string>(r[9]);
        row.pgid = get<pid_t>(r[10]);
        if (!r[4].is_null()) {
            ProcessIdentity identity;
            identity.pid = r[4].as<pid_t>();
            identity.boot_id = get<std::string>(r[5]).value_or("");
            identity.start_ticks = get<std::uint64_t>(r[6]).value_or(0);
            identity.pidfs_ino = get<std::uint64_t>(r[7]);
            identity.cookie = row.cookie;
            row.identity = identity;
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

std::optional<std::string> status_of(pqxx::connection& conn, const std::string& id)
{
    const auto result = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params("SELECT status FROM process WHERE id = $1", id);
    });
    if (result.empty()) {
        return std::nullopt;
    }
    return result[0][0].as<std::string>();
}

} // namespace orch::process_table
