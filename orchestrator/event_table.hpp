#pragma once

#include <nlohmann/json.hpp>

#include <ostream>

// How the ops commands (events, show crawl, status) present journal events.
namespace orch {

// The SQL expression (over `ops.events e`) that gives one event as the JSON
// object every command prints: id, at, kind, actor, os_user, machine_id,
// process_id, crawl_id, snapshot_id, message, detail.
inline constexpr const char* k_event_json =
    "jsonb_build_object('id', e.id, 'at', e.at, 'kind', e.kind, 'actor', e.actor, 'os_user', e.os_user,"
    " 'machine_id', e.machine_id, 'process_id', e.process_id, 'crawl_id', e.crawl_id,"
    " 'snapshot_id', e.snapshot_id, 'message', e.message, 'detail', e.detail)";

// `events` (objects as k_event_json makes them) as a table: AT, EVENT, BY
// (program and OS user), CRAWL (a short id, unless `crawl_column` is false)
// and MESSAGE. Prints nothing for none.
void print_event_table(std::ostream& out, const nlohmann::json& events, bool crawl_column);

} // namespace orch
