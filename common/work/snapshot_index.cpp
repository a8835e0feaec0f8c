#include "common/work/snapshot_index.hpp"

#include "common/base/atomic_file.hpp"
#include "common/base/log.hpp"
#include "common/db/autocommit_statement.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace orch {

std::string index_timestamp_sql(const std::string& column)
{
    return fmt::format("to_char(({}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')", column);
}

namespace {

// json_build_object, not jsonb: the document keeps the documented key order.
// The results are those of the snapshot's latest attempt (one row per hook,
// rewritten by each attempt); their output files are relative to the hook's
// directory, <snapshot dir>/<plugin>/.
std::string snapshot_statement()
{
    const auto ts = index_timestamp_sql;
    return fmt::format(
        "SELECT json_build_object('format', {0}, 'id', s.id, 'crawl_id', s.crawl_id, 'url', s.url,"
        "  'title', s.title, 'depth', s.depth,"
        "  'parent', CASE WHEN s.parent_snapshot_id IS NULL THEN NULL"
        "                 ELSE json_build_object('id', s.parent_snapshot_id, 'url', p.url) END,"
        "  'status', s.status, 'outcome', s.outcome, 'error', s.error, 'attempt', s.attempts,"
        "  'created_at', {1}, 'started_at', {2}, 'sealed_at', {3}, 'dir', 'snapshots/' || s.id,"
        "  'hooks', coalesce((SELECT json_agg(json_build_object('plugin', a.plugin, 'hook_name', a.hook_name,"
        "       'status', a.status, 'attempts', a.attempts, 'started_at', {4}, 'ended_at', {5},"
        "       'output_str', a.output_str, 'error', a.error, 'output_size', a.output_size,"
        "       'output_files', a.output_files) ORDER BY a.hook_name)"
        "     FROM archive_result a WHERE a.snapshot_id = s.id), '[]'::json))::text "
        "FROM snapshot s LEFT JOIN snapshot p ON p.id = s.parent_snapshot_id WHERE s.id = $1",
        k_snapshot_index_format, ts("s.created_at"), ts("s.started_at"), ts("s.sealed_at"), ts("a.start_ts"),
        ts("a.end_ts"));
}

} // namespace

std::string snapshot_index_document(pqxx::connection& conn, const std::string& snapshot_id)
{
    static const auto statement = snapshot_statement();
    auto r = exec_autocommit(conn, "snapshot_index.document", statement, snapshot_id);
    if (r.empty()) {
        return {};
    }
    // Indented for the people who open it; replaced, not thrown: bytes a hook
    // recorded that are not UTF-8 cannot be in the database's text anyway.
    return nlohmann::ordered_json::parse(r[0][0].c_str()).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
}

bool write_snapshot_index(pqxx::connection& conn, const std::string& snapshot_id,
                          const std::filesystem::path& snap_dir) noexcept
{
    try {
        const auto document = snapshot_index_document(conn, snapshot_id);
        if (document.empty()) {
            log::warn("snapshot index not written: no such snapshot", {{"snapshot", snapshot_id}});
            return false;
        }
        std::filesystem::create_directories(snap_dir);
        AtomicFile file(snap_dir / "index.json");
        file.write(document);
        file.commit();
        return true;
    } catch (const std::exception& e) {
        log::warn("snapshot index not written", {{"snapshot", snapshot_id}, {"error", e.what()}});
    } catch (...) {
        log::warn("snapshot index not written", {{"snapshot", snapshot_id}});
    }
    return false;
}

} // namespace orch
