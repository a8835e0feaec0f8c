#include "orchestrator/ops_commands.hpp"

#include "orchestrator/listing_output.hpp"
#include "orchestrator/ops_session.hpp"
#include "common/db/array_parameter.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/ids.hpp"
#include "orchestrator/age_option.hpp"
#include "orchestrator/event_table.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>

#include <iostream>

namespace orch {
namespace {

// The newest $4 matching events, oldest first; one JSON object per row.
const std::string k_query = std::string("SELECT j FROM (SELECT e.id, ") + k_event_json +
                            "::text AS j FROM ops.events e"
                            "  WHERE ($1::uuid IS NULL OR e.crawl_id = $1::uuid)"
                            "    AND ($2::interval IS NULL OR e.at >= now() - $2::interval)"
                            "    AND ($3::text[] IS NULL OR e.kind = ANY ($3::text[])"
                            "         OR split_part(e.kind, '.', 1) = ANY ($3::text[]))"
                            "  ORDER BY e.id DESC LIMIT $4) newest "
                            "ORDER BY id";

} // namespace

void command_events(const CommonOptions& options, const EventsOptions& events)
{
    const auto crawl_id = optional_uuid(events.crawl_id, "crawl id");
    const auto since = optional_age(events.since, "--since");
    std::optional<std::string> kinds;
    if (!events.kinds.empty()) {
        for (const auto& wanted : events.kinds) {
            const bool known = std::any_of(std::begin(k_event_kinds), std::end(k_event_kinds), [&](const char* kind) {
                const std::string_view k(kind);
                return k == wanted || k.substr(0, k.find('.')) == wanted;
            });
            if (!known) {
                throw InvalidInput(fmt::format("--kind '{}': no such event kind or noun (kinds: {})", wanted,
                                               fmt::join(std::begin(k_event_kinds), std::end(k_event_kinds), ", ")));
            }
        }
        kinds = array_parameter(events.kinds);
    }
    OpsSession session(options, OpsSession::Schema::current);
    pqxx::read_transaction tx(session.conn());
    auto rows = tx.exec_params(k_query, crawl_id, since, kinds, events.limit);
    const bool json = json_lines_wanted(events.json, events.text);
    if (json) {
        print_json_lines(std::cout, rows);
        return;
    }
    if (rows.empty()) {
        std::cout << "no events\n";
        return;
    }
    print_event_table(std::cout, parsed_json_rows(rows), true);
}

} // namespace orch
