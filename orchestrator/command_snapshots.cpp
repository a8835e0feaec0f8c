#include "orchestrator/ops_commands.hpp"

#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "common/db/array_parameter.hpp"
#include "orchestrator/listing_output.hpp"
#include "orchestrator/ops_session.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

// `orchestrator snapshots CRAWL_ID`: a crawl's snapshots (ops.crawl_snapshots),
// in creation order, to find the one `show snapshot` or `retry` takes, or its
// directory under the data directory.
namespace orch {
namespace {

constexpr const char* k_crawl_exists = "SELECT 1 FROM crawl WHERE id = $1";
// Creation order, the id breaking ties: the same order each time, so that
// --limit pages are stable. $2: states (a status or an outcome), $3: a host.
constexpr const char* k_declare =
    "DECLARE snapshot_rows NO SCROLL CURSOR FOR "
    "SELECT json_build_object('id', v.id, 'url', v.url, 'host', v.host, 'depth', v.depth, 'status', v.status,"
    "  'outcome', v.outcome, 'title', v.title, 'attempts', v.attempts, 'error', v.error, 'dir', v.dir,"
    "  'parent_snapshot_id', v.parent_snapshot_id, 'created_at', v.created_at, 'sealed_at', v.sealed_at)::text "
    "FROM ops.crawl_snapshots v WHERE v.crawl_id = $1"
    "  AND ($2::text[] IS NULL OR v.status = ANY ($2::text[]) OR v.outcome = ANY ($2::text[]))"
    "  AND ($3::text IS NULL OR v.host = lower($3::text)) "
    "ORDER BY v.created_at, v.id LIMIT $4";
constexpr int k_page_rows = 1000;

std::string state(const nlohmann::json& s)
{
    return s["outcome"].is_null() ? field_text(s, "status") : field_text(s, "outcome");
}

} // namespace

void command_snapshots(const CommonOptions& options, const SnapshotsOptions& snapshots)
{
    const auto crawl_id = require_uuid(snapshots.crawl_id, "crawl id");
    std::optional<std::string> states;
    if (!snapshots.states.empty()) {
        states = array_parameter(snapshots.states);
    }
    std::optional<std::string> host;
    if (!snapshots.host.empty()) {
        host = snapshots.host;
    }
    std::optional<long> limit;
    if (snapshots.limit > 0) {
        limit = snapshots.limit;
    }
    const bool json_lines = json_lines_wanted(snapshots.json, snapshots.text);
    OpsSession session(options, OpsSession::Schema::current, {{"snapshots_crawl_exists", k_crawl_exists}});
    pqxx::read_transaction tx(session.conn());
    if (tx.exec_prepared("snapshots_crawl_exists", crawl_id).empty()) {
        throw NotFound(fmt::format("crawl {} not found", crawl_id));
    }
    // A cursor: a crawl may have a hundred thousand snapshots. JSON lines go out
    // as they are fetched; the table keeps only its cells.
    TextTable table({"URL", "SNAPSHOT", "STATUS", "DEPTH", "DIRECTORY"});
    tx.exec_params(k_declare, crawl_id, states, host, limit);
    long count = 0;
    for (;;) {
        auto page = tx.exec("FETCH " + std::to_string(k_page_rows) + " FROM snapshot_rows");
        if (page.empty()) {
            break;
        }
        for (const auto& row : page) {
            ++count;
            if (json_lines) {
                std::cout << row[0].c_str() << '\n';
                continue;
            }
            const auto s = nlohmann::json::parse(row[0].c_str());
            table.add_row({one_line(field_text(s, "url"), 80), field_text(s, "id"), state(s), field_text(s, "depth"),
                           field_text(s, "dir")});
        }
    }
    tx.commit();
    if (json_lines) {
        return;
    }
    if (count == 0) {
        std::cout << (states || host ? "no snapshots match\n" : "no snapshots\n");
        return;
    }
    table.print(std::cout);
}

} // namespace orch
