#pragma once

#include "orchestrator/crawl_enqueue.hpp"

#include <pqxx/pqxx>

#include <string>
#include <vector>

namespace orch {

struct ScheduleRow {
    std::string id;
    std::string schedule;
    bool enabled = false;
    std::string next_run_at;
    std::string last_run_at; // empty when never run
    std::string label;
    std::vector<std::string> urls;
};

// Stores a schedule with the id `id` (a UUID the caller made) that enqueues
// `crawl` (validated now) at every tick of `schedule`. A schedule with that id
// and the same expression, template and label is left as it is (adding is
// idempotent by id). Rides out a lost connection (ride_out). Throws
// InvalidInput for a bad schedule or URL, or when the existing schedule differs.
void add_schedule(pqxx::connection& conn, const std::string& schedule, const NewCrawl& crawl, const std::string& id);
std::vector<ScheduleRow> list_schedules(pqxx::connection& conn);
// False when there is no such schedule.
bool set_schedule_enabled(pqxx::connection& conn, const std::string& id, bool enabled);

// Enqueues one crawl for every due tick of every enabled schedule, exactly once per
// tick even with several orchestrators: rows are claimed FOR UPDATE SKIP LOCKED and
// the (schedule, tick) unique index refuses a second crawl. Returns crawls added.
int enqueue_due_schedules(pqxx::connection& conn);

} // namespace orch
