#include "common/recorder/process_table.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/db/pending_statement.hpp"
#include "common/recorder/process_row_values.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>

// How process exits are written: one SET list, filled from keyed parameters (a
// CTE per exit, up to k_max_keyed_exits) or from a JSON array, joined to the
// statement that carries them (a row insert, a seal, or a statement of their own).
namespace orch::process_table {
namespace {

// Where an exit write reads its values: columns of a JSON row, or parameters.
struct ExitValues {
    std::string pid, boot_id, start_ticks, pidfs_ino, pgid, started_ago, ended_ago, exit_code, term_signal,
        end_reason, stdout_tail, stderr_tail, cgroup_path, cpu_user_s, cpu_system_s;
};

// The SET list of an exit write to process `p`. A row whose running write never
// happened gets its identity here (pid not NULL); an exit overwrites an earlier
// end reason but keeps a recorded exit code, signal, tail and ended_at that it
// does not carry itself.
std::string exit_assignments(const ExitValues& v)
{
    return fmt::format(
        "status = 'exited', pid = coalesce({0}, p.pid), boot_id = coalesce({1}, p.boot_id),"
        " start_ticks = coalesce({2}, p.start_ticks),"
        " pidfs_ino = CASE WHEN {0} IS NULL THEN p.pidfs_ino ELSE {3} END, pgid = coalesce({4}, p.pgid),"
        " started_at = CASE WHEN {0} IS NULL THEN p.started_at ELSE now() - make_interval(secs => {5}) END,"
        " heartbeat_at = CASE WHEN {0} IS NULL THEN p.heartbeat_at ELSE now() END,"
        " ended_at = coalesce(p.ended_at, now() - make_interval(secs => {6})),"
        " exit_code = coalesce({7}, p.exit_code), term_signal = coalesce({8}, p.term_signal),"
        " end_reason = {9}, stdout_tail = coalesce({10}, p.stdout_tail),"
        " stderr_tail = coalesce({11}, p.stderr_tail), cgroup_path = coalesce({12}, p.cgroup_path),"
        " cpu_user_s = coalesce({13}, p.cpu_user_s), cpu_system_s = coalesce({14}, p.cpu_system_s)",
        v.pid, v.boot_id, v.start_ticks, v.pidfs_ino, v.pgid, v.started_ago, v.ended_ago, v.exit_code, v.term_signal,
        v.end_reason, v.stdout_tail, v.stderr_tail, v.cgroup_path, v.cpu_user_s, v.cpu_system_s);
}

} // namespace

std::string exits_json(const std::vector<HeldExit>& exits)
{
    const auto now = std::chrono::steady_clock::now();
    auto json_or_null = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(); };
    auto out = nlohmann::json::array();
    for (const auto& e : exits) {
        nlohmann::json row{{"id", e.id},
                           {"ended_ago", seconds_ago(now, e.ended)},
                           {"exit_code", json_or_null(e.end.exit_code)},
                           {"term_signal", json_or_null(e.end.term_signal)},
                           {"end_reason", e.end.end_reason},
                           {"stdout_tail", json_or_null(storable(e.end.stdout_tail))},
                           {"stderr_tail", json_or_null(storable(e.end.stderr_tail))}};
        if (const auto& usage = e.end.usage) {
            row["cpu_user_s"] = usage->user_s;
            row["cpu_system_s"] = usage->system_s;
        }
        if (e.identity) {
            row["pid"] = e.identity->pid;
            row["boot_id"] = e.identity->boot_id;
            row["start_ticks"] = e.identity->start_ticks;
            row["pidfs_ino"] = json_or_null(e.identity->pidfs_ino);
            row["pgid"] = e.pgid;
            row["started_ago"] = seconds_ago(now, e.spawned);
            row["cgroup_path"] = json_or_null(e.cgroup_path);
        }
        out.push_back(std::move(row));
    }
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string exits_update(const std::string& param)
{
    // The exits come through unnest(ARRAY(...)), estimated at 10 rows, not
    // through jsonb_to_recordset, estimated at 100: with 100, the cached plan
    // hashes a sequential scan of the whole process table (measured: 1.9 ms per
    // insert at 12k rows, linear in the table) instead of probing its key.
    static const std::string set = exit_assignments(
        {"e.pid", "e.boot_id", "e.start_ticks", "e.pidfs_ino", "e.pgid", "e.started_ago", "e.ended_ago",
         "e.exit_code", "e.term_signal", "e.end_reason", "e.stdout_tail", "e.stderr_tail", "e.cgroup_path",
         "e.cpu_user_s", "e.cpu_system_s"});
    return "UPDATE process p SET " + set + " FROM unnest(ARRAY(SELECT jsonb_array_elements(" + param +
           "::jsonb))) AS held(exit),"
           " jsonb_to_record(held.exit) AS e(id uuid, pid integer, boot_id text,"
           "   start_ticks bigint, pidfs_ino bigint, pgid integer, started_ago double precision,"
           "   ended_ago double precision, exit_code integer, term_signal integer, end_reason text,"
           "   stdout_tail text, stderr_tail text, cgroup_path text, cpu_user_s double precision,"
           "   cpu_system_s double precision)"
           " WHERE p.id = e.id";
}

namespace {

// The SET list of an exit write whose values are the parameters from `$first`
// on, in exit_params' order (the row id is the parameter just before them).
std::string exit_assignments_from(int first)
{
    auto p = [first](int offset, const char* type) { return fmt::format("${}::{}", first + offset, type); };
    return exit_assignments({p(0, "integer"), p(1, "text"), p(2, "bigint"), p(3, "bigint"), p(4, "integer"),
                             p(5, "double precision"), p(6, "double precision"), p(7, "integer"), p(8, "integer"),
                             p(9, "text"), p(10, "text"), p(11, "text"), p(12, "text"), p(13, "double precision"),
                             p(14, "double precision")});
}

// The row id, then the 15 values exit_assignments_from() reads.
constexpr int k_params_per_exit = 16;
std::array<std::optional<std::string>, k_params_per_exit> exit_params(const HeldExit& exit)
{
    const auto now = std::chrono::steady_clock::now();
    // The identity's parameters stay NULL when the running write recorded it.
    std::optional<std::string> pid, boot_id, start_ticks, pidfs_ino, pgid, started_ago, cgroup_path;
    if (const auto& identity = exit.identity) {
        cgroup_path = exit.cgroup_path;
        pid = std::to_string(identity->pid);
        boot_id = identity->boot_id;
        start_ticks = std::to_string(identity->start_ticks);
        pidfs_ino = text(identity->pidfs_ino);
        pgid = std::to_string(exit.pgid);
        started_ago = pqxx::to_string(seconds_ago(now, exit.spawned));
    }
    return {exit.id,
            pid,
            boot_id,
            start_ticks,
            pidfs_ino,
            pgid,
            started_ago,
            pqxx::to_string(seconds_ago(now, exit.ended)),
            text(exit.end.exit_code),
            text(exit.end.term_signal),
            exit.end.end_reason,
            storable(exit.end.stdout_tail),
            storable(exit.end.stderr_tail),
            cgroup_path,
            usage_text(exit.end.usage, &ResourceUsage::user_s),
            usage_text(exit.end.usage, &ResourceUsage::system_s)};
}

} // namespace

std::string exits_ctes(std::size_t count, int first)
{
    if (count > k_max_keyed_exits) {
        return "ended AS (" + exits_update("$" + std::to_string(first)) + "), ";
    }
    std::string ctes;
    for (std::size_t i = 0; i < count; ++i) {
        const int id = first + static_cast<int>(i) * k_params_per_exit;
        ctes += fmt::format("ended{} AS (UPDATE process p SET {} WHERE p.id = ${}::uuid), ", i + 1,
                            exit_assignments_from(id + 1), id);
    }
    return ctes;
}

std::vector<std::optional<std::string>> exits_parameters(const std::vector<HeldExit>& exits)
{
    if (exits.size() > k_max_keyed_exits) {
        return {exits_json(exits)};
    }
    std::vector<std::optional<std::string>> params;
    for (const auto& exit : exits) {
        auto one = exit_params(exit);
        params.insert(params.end(), one.begin(), one.end());
    }
    return params;
}

std::size_t exits_parameter_count(std::size_t count)
{
    return count > k_max_keyed_exits ? 1 : count * k_params_per_exit;
}

std::string exits_variant_name(std::size_t count)
{
    return count > k_max_keyed_exits ? "json" : "e" + std::to_string(count);
}

std::string with_exits(std::size_t count, int first, const std::string& statement)
{
    const auto ctes = exits_ctes(count, first);
    return ctes.empty() ? statement : "WITH " + ctes.substr(0, ctes.size() - 2) + " " + statement;
}

PendingStatement send_write_exits(pqxx::connection& conn, const std::vector<HeldExit>& exits)
{
    static const auto sql = exits_variants(
        [](std::size_t count) { return with_exits(count, 1, "SELECT 1 FROM " + std::string(k_async_commit)); });
    return PendingStatement(conn, "process_table.write_exits." + exits_variant_name(exits.size()),
                            sql[exits_variant(exits.size())], exits_parameters(exits));
}

} // namespace orch::process_table
