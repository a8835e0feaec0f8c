#include "orchestrator/ops_commands.hpp"

#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "orchestrator/ops_session.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

// `orchestrator report CRAWL_ID`: what a crawl archived and what went wrong,
// in sections. Each section is one ops view (migrations: ops.crawl_report_*)
// and one entry of k_sections below: its statement and its table's columns.
namespace orch {
namespace {

constexpr const char* k_crawl =
    "SELECT json_build_object('id', c.id, 'label', c.label, 'status', c.status, 'outcome', c.outcome,"
    "  'seal_reason', c.seal_reason, 'urls', cardinality(c.urls), 'first_url', c.urls[1],"
    "  'created_at', c.created_at, 'sealed_at', c.sealed_at,"
    "  'snapshots', json_build_object('total', p.snapshots, 'sealed', p.sealed, 'succeeded', p.succeeded,"
    "     'partial', p.partial, 'failed', p.failed, 'cancelled', p.cancelled, 'timed_out', p.timed_out))::text "
    "FROM crawl c JOIN ops.crawl_progress p ON p.crawl_id = c.id WHERE c.id = $1";

struct Column {
    const char* header;
    const char* key;
    std::size_t width = 0; // cut to this many characters (0: never)
};

// One section of the report: its JSON key, its heading, its statement ($1 the
// crawl, $2 how many rows at most: the top N) and the columns its table shows.
struct ReportSection {
    const char* key;
    const char* heading;
    const char* statement;
    std::vector<Column> columns;
};

const std::vector<ReportSection>& sections()
{
    static const std::vector<ReportSection> k_sections = {
        {"hosts", "Hosts (most failures first)",
         "SELECT json_build_object('host', host, 'snapshots', snapshots, 'succeeded', succeeded,"
         "  'failures', failures, 'unsealed', unsealed)::text "
         "FROM ops.crawl_report_hosts WHERE crawl_id = $1 ORDER BY failures DESC, snapshots DESC, host LIMIT $2",
         {{"HOST", "host", 60}, {"SNAPSHOTS", "snapshots"}, {"SUCCEEDED", "succeeded"}, {"FAILURES", "failures"},
          {"UNSEALED", "unsealed"}}},
        {"status_codes", "HTTP status codes of the pages",
         "SELECT json_build_object('status_code', status_code, 'pages', pages)::text "
         "FROM ops.crawl_report_status_codes WHERE crawl_id = $1 ORDER BY pages DESC, status_code LIMIT $2",
         {{"STATUS", "status_code"}, {"PAGES", "pages"}}},
        {"mime_types", "MIME types of the pages",
         "SELECT json_build_object('mime_type', mime_type, 'pages', pages)::text "
         "FROM ops.crawl_report_mime_types WHERE crawl_id = $1 ORDER BY pages DESC, mime_type LIMIT $2",
         {{"MIME TYPE", "mime_type", 60}, {"PAGES", "pages"}}},
        {"failures", "Failures by plugin and reason (plugin - : the snapshot itself)",
         "SELECT json_build_object('plugin', plugin, 'reason', reason, 'results', results, 'snapshots', snapshots,"
         "  'example_url', example_url, 'last_at', last_at)::text "
         "FROM ops.crawl_report_failures WHERE crawl_id = $1 "
         "ORDER BY results DESC, plugin NULLS FIRST, reason LIMIT $2",
         {{"PLUGIN", "plugin"}, {"RESULTS", "results"}, {"SNAPSHOTS", "snapshots"}, {"REASON", "reason", 70},
          {"EXAMPLE", "example_url", 60}}},
        {"skipped", "Links not followed, by reason (out of scope, denied)",
         "SELECT json_build_object('reason', reason, 'urls', urls, 'listed', listed, 'example_url', example_url,"
         "  'last_found_at', last_found_at)::text "
         "FROM ops.crawl_report_skipped WHERE crawl_id = $1 ORDER BY urls DESC, reason LIMIT $2",
         {{"REASON", "reason"}, {"URLS", "urls"}, {"LISTED", "listed"}, {"EXAMPLE", "example_url", 60}}},
    };
    return k_sections;
}

std::string statement_name(const ReportSection& section)
{
    return std::string("report_") + section.key;
}

nlohmann::json section_rows(pqxx::read_transaction& tx, const ReportSection& section, const std::string& crawl_id,
                            long top)
{
    auto rows = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared(statement_name(section), crawl_id, top)) {
        rows.push_back(nlohmann::json::parse(row[0].c_str()));
    }
    return rows;
}

void print_section(const ReportSection& section, const nlohmann::json& rows)
{
    std::cout << '\n' << section.heading << '\n';
    if (rows.empty()) {
        std::cout << "  none\n";
        return;
    }
    std::vector<std::string> header;
    for (const auto& c : section.columns) {
        header.emplace_back(c.header);
    }
    TextTable table(header);
    for (const auto& row : rows) {
        std::vector<std::string> cells;
        for (const auto& c : section.columns) {
            auto text = field_text(row, c.key);
            cells.push_back(c.width ? one_line(text, c.width) : text);
        }
        table.add_row(std::move(cells));
    }
    table.print(std::cout);
}

void print_crawl(const nlohmann::json& c)
{
    const auto& k = c["snapshots"];
    std::cout << fmt::format("crawl     {}\nstatus    {}{}\nseeds     {}{}\n", field_text(c, "id"),
                             field_text(c, "status"), c["outcome"].is_null() ? "" : " " + field_text(c, "outcome"),
                             field_text(c, "first_url"),
                             c["urls"].get<long>() > 1 ? fmt::format(" (+{})", c["urls"].get<long>() - 1) : "");
    std::cout << fmt::format("snapshots {} ({} sealed): {} succeeded, {} partial, {} failed, {} cancelled, "
                             "{} timed out\n",
                             field_text(k, "total"), field_text(k, "sealed"), field_text(k, "succeeded"),
                             field_text(k, "partial"), field_text(k, "failed"), field_text(k, "cancelled"),
                             field_text(k, "timed_out"));
}

} // namespace

void command_report(const CommonOptions& options, const ReportOptions& report)
{
    const auto crawl_id = require_uuid(report.crawl_id, "crawl id");
    std::vector<OpsStatement> statements{{"report_crawl", k_crawl}};
    for (const auto& section : sections()) {
        statements.push_back({statement_name(section), section.statement});
    }
    OpsSession session(options, OpsSession::Schema::current, statements);
    pqxx::read_transaction tx(session.conn());
    auto r = tx.exec_prepared("report_crawl", crawl_id);
    if (r.empty()) {
        throw NotFound(fmt::format("crawl {} not found", crawl_id));
    }
    auto out = nlohmann::json::object();
    out["crawl"] = nlohmann::json::parse(r[0][0].c_str());
    for (const auto& section : sections()) {
        out[section.key] = section_rows(tx, section, crawl_id, report.top);
    }
    tx.commit();
    if (report.json) {
        std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        return;
    }
    print_crawl(out["crawl"]);
    for (const auto& section : sections()) {
        print_section(section, out[section.key]);
    }
}

} // namespace orch
