#include "orchestrator/commands.hpp"

#include "common/db/database.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "common/db/migrate.hpp"
#include "common/base/random_id.hpp"
#include "orchestrator/crawl_config_check.hpp"
#include "orchestrator/schedules.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace orch {

void command_schedule(const CommonOptions& options, const ScheduleOptions& schedule)
{
    NewCrawl crawl;
    if (schedule.action == "add") {
        crawl.urls = schedule.add.urls;
        crawl.max_depth = schedule.add.depth;
        crawl.scope = schedule.add.scope;
        crawl.max_urls = schedule.add.max_urls;
        crawl.max_per_host = schedule.add.max_per_host;
        crawl.host_delay_s = schedule.add.host_delay_s;
        crawl.timeout_s = schedule.add.timeout_s;
        if (!schedule.add.label.empty()) {
            crawl.label = schedule.add.label;
        }
        crawl.tags = schedule.add.tags;
        validated_urls(crawl.urls);
        if (!schedule.add.config_json.empty()) {
            crawl.config = crawl_config_option(schedule.add.config_json, schedule.add.plugins_dir);
        }
    }
    std::string id;
    if (schedule.action == "disable" || schedule.action == "enable") {
        id = require_uuid(schedule.id, "schedule id");
    } else if (schedule.action == "add") {
        id = schedule.add.id.empty() ? random_uuid() : require_uuid(schedule.add.id, "schedule id");
    }
    auto data_dir = prepare_data_dir(options);
    auto db = Database::open(options, data_dir);
    apply_migrations(db.conn());
    if (schedule.action == "add") {
        // A lost connection is waited for and the add retried, as the workers do.
        set_outage_policy({outage_grace_from_env(), -1, {}, {}, {}});
        add_schedule(db.conn(), schedule.every, crawl, id);
        std::cout << id << std::endl;
    } else if (schedule.action == "list") {
        for (const auto& s : list_schedules(db.conn())) {
            if (schedule.json) {
                std::cout << nlohmann::json{{"id", s.id},     {"schedule", s.schedule},   {"enabled", s.enabled},
                                            {"next_run_at", s.next_run_at}, {"last_run_at", s.last_run_at},
                                            {"label", s.label}, {"urls", s.urls}}
                                 .dump()
                          << '\n';
            } else {
                std::cout << fmt::format("{}  {:<16} {:<8} next {}  {}\n", s.id, s.schedule,
                                         s.enabled ? "enabled" : "disabled", s.next_run_at, fmt::join(s.urls, " "));
            }
        }
    } else if (!set_schedule_enabled(db.conn(), id, schedule.action == "enable")) {
        throw NotFound(fmt::format("schedule {} not found", id));
    }
}

} // namespace orch
