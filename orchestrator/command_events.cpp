#include "orchestrator/ops_commands.hpp"

#include "common/array_parameter.hpp"
#include "common/errors.hpp"
#include "common/ids.hpp"
#include "orchestrator/age_option.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

namespace orch {
namespace {

// The newest $4 matching events, oldest first; one JSON object per row.
constexpr const char* k_query =
    "SELECT j FROM ("
    "  SELECT e.id, jsonb_build_object("
    "    'id', e.id, 'at', e.at, 'kind', e.kind, 'actor', e.actor, 'os_user', e.os_user,"
    "    'machine_id', e.machine_id, 'process_id', e.process_id, 'crawl_id', e.crawl_id,"
    "    'snapshot_id', e.snapshot_id, 'message', e.message, 'detail', e.detail)::text AS j"
    "  FROM ops.events e"
    "  WHERE ($1::uuid IS NULL OR e.crawl_id = $1::uuid)"
    "    AND ($2::interval IS NULL OR e.at >= now() - $2::interval)"
    "    AND ($3::text[] IS NULL OR e.kind = ANY ($3::text[]) OR split_part(e.kind, '.', 1) = ANY ($3::text[]))"
    "  ORDER BY e.id DESC LIMIT $4) newest "
    "ORDER BY id";

std::string text_of(const nlohmann::json& j, const char* key)
{
    const auto& v = j.at(key);
    return v.is_null() ? std::string("-") : v.is_string() ? v.get<std::string>() : v.dump();
}

} // namespace

void command_events(const CommonOptions& options, const EventsOptions& events)
{
    std::optional<std::string> crawl_id;
    if (!events.crawl_id.empty()) {
        crawl_id = require_uuid(events.crawl_id, "crawl id");
    }
    std::optional<std::string> since;
    if (!events.since.empty()) {
        since = parse_age(events.since, "--since");
    }
    std::optional<std::string> kinds;
    if (!events.kinds.empty()) {
        kinds = array_parameter(events.kinds);
    }
    auto db = open_ops_database(options, false);
    pqxx::read_transaction tx(db.conn());
    auto rows = tx.exec_params(k_query, crawl_id, since, kinds, events.limit);
    const bool json = events.json || (!events.text && !stdout_is_terminal());
    if (json) {
        for (const auto& row : rows) {
            std::cout << row[0].c_str() << '\n';
        }
        return;
    }
    TextTable table({"AT", "KIND", "BY", "CRAWL", "MESSAGE"});
    for (const auto& row : rows) {
        auto j = nlohmann::json::parse(row[0].c_str());
        auto at = text_of(j, "at");
        // "2026-11-25T06:40:12.345678+00:00" -> "2026-11-25 06:40:12"
        if (at.size() >= 19) {
            at = at.substr(0, 10) + " " + at.substr(11, 8);
        }
        auto by = text_of(j, "actor");
        if (!j.at("os_user").is_null()) {
            by += " (" + j.at("os_user").get<std::string>() + ")";
        }
        table.add_row({at, text_of(j, "kind"), by, short_id(j.at("crawl_id").is_null() ? "" : text_of(j, "crawl_id")),
                       one_line(text_of(j, "message"), 120)});
    }
    if (table.empty()) {
        std::cout << "no events\n";
        return;
    }
    table.print(std::cout);
}

} // namespace orch
