#include "orchestrator/ops_commands.hpp"

#include "orchestrator/listing_output.hpp"
#include "orchestrator/ops_session.hpp"
#include "common/db/array_parameter.hpp"
#include "common/base/ids.hpp"
#include "orchestrator/age_option.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

namespace orch {
namespace {

// One JSON object per row; the same keys in text and JSON modes. {} is the view.
constexpr const char* k_tree_query =
    "SELECT jsonb_build_object("
    "  'id', t.id, 'parent_id', t.parent_id, 'root_id', t.root_id, 'depth', t.depth, 'path', t.path,"
    "  'type', t.type, 'status', t.status, 'machine_id', t.machine_id, 'pid', t.pid,"
    "  'crawl_id', t.crawl_id, 'snapshot_id', t.snapshot_id, 'plugin', t.plugin, 'hook_name', t.hook_name,"
    "  'started_at', t.started_at, 'ended_at', t.ended_at,"
    "  'runtime_s', extract(epoch FROM t.runtime)::float8,"
    "  'cpu_s', (SELECT c.cpu_user_s + c.cpu_system_s FROM process c WHERE c.id = t.id),"
    "  'exit_code', t.exit_code, 'term_signal', t.term_signal, 'signal_name', t.signal_name,"
    "  'end_reason', t.end_reason, 'outcome', t.outcome)::text "
    "FROM {} t "
    "WHERE ($1::uuid IS NULL"
    "   OR EXISTS (SELECT 1 FROM process a WHERE a.crawl_id = $1::uuid AND a.id = ANY (t.path))) "
    "  AND ($2::text[] IS NULL OR t.status = ANY ($2::text[])) "
    "ORDER BY t.sort_key";

std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback = "-")
{
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return fallback;
    }
    return it->is_string() ? it->get<std::string>() : it->dump();
}

std::optional<int> int_or_null(const nlohmann::json& j, const char* key)
{
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? std::nullopt : std::optional(it->get<int>());
}

// What a row works on: "crawl 1a2b3c4d", "snapshot 9f8e7d6c", "wget/on_Snapshot__50_wget".
std::string work_of(const nlohmann::json& row)
{
    if (row["type"] == "hook") {
        return text_or(row, "plugin", "?") + "/" + text_or(row, "hook_name", "?");
    }
    if (!row["snapshot_id"].is_null()) {
        return "snapshot " + short_id(row["snapshot_id"].get<std::string>());
    }
    if (!row["crawl_id"].is_null()) {
        return "crawl " + short_id(row["crawl_id"].get<std::string>());
    }
    return "";
}

} // namespace

void command_ps(const CommonOptions& options, const PsOptions& ps)
{
    const auto crawl_id = optional_uuid(ps.crawl_id, "crawl id");
    const auto since = optional_age(ps.since, "--since");
    // The --state values (members of a fixed set) as one text[] parameter.
    const auto states = ps.states.empty() ? std::nullopt : std::optional<std::string>(array_parameter(ps.states));
    // Exited rows are only in the whole history: asking for them implies --all.
    const bool all = ps.all || std::find(ps.states.begin(), ps.states.end(), "exited") != ps.states.end();
    OpsSession session(options, OpsSession::Schema::current);
    auto& conn = session.conn();
    const bool json_lines = json_lines_wanted(ps.json, ps.text);
    TextTable table({"TYPE", "ID", "PID", "STATUS", "RUNTIME", "CPU", "EXIT", "WORK"});
    auto add_row = [&table](const nlohmann::json& row) {
        auto depth = row["depth"].get<int>();
        std::string tree = depth == 0 ? "" : std::string(static_cast<std::size_t>(depth - 1) * 2, ' ') + "`-";
        auto runtime = row["runtime_s"].is_null() ? std::nullopt : std::optional(row["runtime_s"].get<double>());
        auto cpu = row["cpu_s"].is_null() ? std::nullopt : std::optional(row["cpu_s"].get<double>());
        auto status = row["status"].get<std::string>();
        if (status == "exited" && !row["outcome"].is_null()) {
            status += "/" + row["outcome"].get<std::string>();
        }
        table.add_row({tree + row["type"].get<std::string>(), row["id"].get<std::string>(), text_or(row, "pid"), status,
                       format_duration(runtime), format_cpu(cpu), format_exit(int_or_null(row, "exit_code"), int_or_null(row, "term_signal")),
                       work_of(row)});
    };
    // A cursor, not one result: `ps --all` on a long-lived installation is millions
    // of rows, which as one result (and as parsed JSON) took the client gigabytes
    // (3.6 GB at 1M rows). JSON lines go out as they are fetched; the table keeps
    // only its cells, which it needs whole for the column widths.
    {
        pqxx::read_transaction tx(conn);
        const std::string declare = "DECLARE ps_rows NO SCROLL CURSOR FOR ";
        if (since) {
            tx.exec_params(declare + fmt::format(k_tree_query, "ops.process_tree_since(now() - $3::interval)"),
                           crawl_id, states, *since);
        } else {
            tx.exec_params(declare + fmt::format(k_tree_query, all ? "ops.process_tree" : "ops.process_tree_live"),
                           crawl_id, states);
        }
        for (;;) {
            auto batch = tx.exec("FETCH 1000 FROM ps_rows");
            if (batch.empty()) {
                break;
            }
            for (const auto& r : batch) {
                auto row = nlohmann::json::parse(r[0].as<std::string>());
                if (json_lines) {
                    std::cout << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
                } else {
                    add_row(row);
                }
            }
        }
        tx.commit();
    }
    if (json_lines) {
        return;
    }
    if (table.empty()) {
        if (since) {
            std::cout << "no process was alive in the last " << ps.since << "\n";
        } else {
            std::cout << (all ? "no processes recorded\n" : "no live processes (--all shows exited ones)\n");
        }
        return;
    }
    table.print(std::cout);
}

} // namespace orch
