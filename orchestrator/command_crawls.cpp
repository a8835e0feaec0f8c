#include "orchestrator/ops_commands.hpp"

#include "orchestrator/listing_output.hpp"
#include "orchestrator/ops_session.hpp"
#include "common/db/array_parameter.hpp"
#include "orchestrator/age_option.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

// `orchestrator crawls`: which crawls there are, newest first, to find the id
// that `show`, `pause`, `cancel` or `retry` take.
namespace orch {
namespace {

// The newest $6 matching crawls (crawl_created_idx), then their snapshot counts:
// each crawl's own snapshots only (snapshot_crawl_status_idx), never the history.
constexpr const char* k_query =
    "SELECT jsonb_build_object('id', c.id, 'label', c.label, 'tags', c.tags, 'status', c.status,"
    "  'outcome', c.outcome, 'seal_reason', c.seal_reason, 'urls', cardinality(c.urls), 'first_url', c.urls[1],"
    "  'max_depth', c.max_depth, 'attempts', c.attempts, 'lease_owner', c.lease_owner,"
    "  'cancel_requested_at', c.cancel_requested_at, 'schedule_id', c.schedule_id, 'created_at', c.created_at,"
    "  'started_at', c.started_at, 'sealed_at', c.sealed_at, 'paused_at', c.paused_at, 'paused_s', c.paused_s,"
    "  'run_s', extract(epoch FROM coalesce(c.sealed_at, now()) - c.started_at) - c.paused_s"
    "           - coalesce(extract(epoch FROM coalesce(c.sealed_at, now()) - c.paused_at), 0),"
    "  'snapshots', k.total, 'sealed', k.sealed, 'succeeded', k.succeeded)::text "
    "FROM (SELECT * FROM crawl"
    "      WHERE ($1::text[] IS NULL OR status = ANY ($1::text[]))"
    "        AND ($2::text[] IS NULL OR outcome = ANY ($2::text[]))"
    "        AND ($3::text IS NULL OR label = $3::text)"
    "        AND ($4::text[] IS NULL OR tags @> $4::text[])"
    "        AND ($5::interval IS NULL OR created_at >= now() - $5::interval)"
    "      ORDER BY created_at DESC, id DESC LIMIT $6) c "
    "CROSS JOIN LATERAL (SELECT count(*) AS total, count(*) FILTER (WHERE s.status = 'sealed') AS sealed,"
    "                           count(*) FILTER (WHERE s.outcome = 'succeeded') AS succeeded"
    "                    FROM snapshot s WHERE s.crawl_id = c.id) k "
    "ORDER BY c.created_at DESC, c.id DESC";

std::string state(const nlohmann::json& c)
{
    auto s = field_text(c, "status");
    if (!c["outcome"].is_null()) {
        s += " " + c["outcome"].get<std::string>();
    } else if (!c["cancel_requested_at"].is_null()) {
        s += " (cancelling)";
    }
    return s;
}

void print_table(const std::vector<nlohmann::json>& crawls)
{
    TextTable table({"CRAWL", "STATUS", "SNAPSHOTS", "OK", "CREATED", "RUN", "LABEL", "URLS"});
    for (const auto& c : crawls) {
        const long urls = c["urls"].get<long>();
        const long total = c["snapshots"].get<long>();
        table.add_row({field_text(c, "id"), state(c), fmt::format("{}/{}", c["sealed"].get<long>(), total),
                       total == 0 ? "-" : std::to_string(c["succeeded"].get<long>()),
                       short_timestamp(field_text(c, "created_at")),
                       c["run_s"].is_null() ? "-" : format_duration(c["run_s"].get<double>()),
                       one_line(field_text(c, "label"), 24),
                       one_line(field_text(c, "first_url"), 60) + (urls > 1 ? fmt::format(" (+{})", urls - 1) : "")});
    }
    table.print(std::cout);
}

} // namespace

void command_crawls(const CommonOptions& options, const CrawlsOptions& crawls)
{
    std::optional<std::string> statuses;
    if (!crawls.statuses.empty()) {
        statuses = array_parameter(crawls.statuses);
    }
    std::optional<std::string> outcomes;
    if (!crawls.outcomes.empty()) {
        outcomes = array_parameter(crawls.outcomes);
    }
    std::optional<std::string> label;
    if (!crawls.label.empty()) {
        label = crawls.label;
    }
    std::optional<std::string> tags;
    if (!crawls.tags.empty()) {
        tags = array_parameter(crawls.tags);
    }
    const auto since = optional_age(crawls.since, "--since");
    OpsSession session(options, OpsSession::Schema::current);
    pqxx::read_transaction tx(session.conn());
    auto rows = tx.exec_params(k_query, statuses, outcomes, label, tags, since, crawls.limit);
    tx.commit();
    if (json_lines_wanted(crawls.json, crawls.text)) {
        print_json_lines(std::cout, rows);
        return;
    }
    if (rows.empty()) {
        std::cout << "no crawls\n";
        return;
    }
    print_table(parsed_json_rows(rows));
}

} // namespace orch
