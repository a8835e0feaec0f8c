#include "orchestrator/schedules.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/log.hpp"
#include "orchestrator/cron.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ctime>

namespace orch {
namespace {

CronSchedule parse_or_throw(const std::string& text)
{
    std::string error;
    auto s = CronSchedule::parse(text, &error);
    if (!s) {
        throw InvalidInput(error);
    }
    return *s;
}

} // namespace

void add_schedule(pqxx::connection& conn, const std::string& schedule, const NewCrawl& crawl,
                  const std::string& id)
{
    auto cron = parse_or_throw(schedule);
    nlohmann::json tmpl = {{"urls", validated_urls(crawl.urls)},
                           {"max_depth", crawl.max_depth},
                           {"scope", crawl.scope},
                           {"config", crawl.config},
                           {"tags", crawl.tags}};
    if (crawl.max_urls) {
        tmpl["max_urls"] = *crawl.max_urls;
    }
    if (crawl.timeout_s) {
        tmpl["timeout_s"] = *crawl.timeout_s;
    }
    if (crawl.max_per_host) {
        tmpl["max_per_host"] = *crawl.max_per_host;
    }
    if (crawl.host_delay_s) {
        tmpl["host_delay_s"] = *crawl.host_delay_s;
    }
    if (crawl.label) {
        tmpl["label"] = *crawl.label;
    }
    auto next = cron.next_after(std::time(nullptr));
    if (!next) {
        // parse() refuses an expression that never matches; never store an invented time.
        throw InvalidInput(fmt::format("schedule '{}' never matches", schedule));
    }
    // As `add`: the id is made by the client, so that a commit whose reply was
    // lost is retried into the schedule it made; a second schedule would
    // enqueue every crawl twice.
    int tries = 0;
    const auto created = ride_out_transaction(conn, [&](pqxx::work& tx) {
        ++tries;
        auto r = tx.exec_params1(
            "WITH inserted AS (INSERT INTO crawl_schedule (id, template, schedule, label, next_run_at) "
            "  VALUES ($5::uuid, $1::jsonb, $2, $3, to_timestamp($4)) ON CONFLICT (id) DO NOTHING RETURNING id) "
            "SELECT EXISTS (SELECT 1 FROM inserted), "
            "  EXISTS (SELECT 1 FROM crawl_schedule WHERE id = $5::uuid AND template = $1::jsonb "
            "    AND schedule = $2 AND label IS NOT DISTINCT FROM $3)",
            tmpl.dump(), schedule, crawl.label, static_cast<double>(*next), id);
        if (!r[0].as<bool>()) {
            if (!r[1].as<bool>()) {
                throw InvalidInput(fmt::format(
                    "schedule {} exists already with another expression, URLs or settings: nothing was added", id));
            }
            return false;
        }
        Event e{"schedule.added", fmt::format("schedule {} added ({} URLs)", schedule, tmpl["urls"].size())};
        e.detail = {{"schedule_id", id}, {"schedule", schedule}};
        record_event(tx, "cli", e);
        return true;
    });
    // After a retry, a schedule found in place is this command's own earlier commit.
    if (!created && tries == 1) {
        log::info("schedule exists already with this expression, URLs and settings: nothing added",
                  {{"schedule_id", id}});
    }
}

std::vector<ScheduleRow> list_schedules(pqxx::connection& conn)
{
    pqxx::read_transaction tx(conn);
    auto r = tx.exec("SELECT id, schedule, enabled, next_run_at::text, coalesce(last_run_at::text, ''), "
                     " coalesce(label, ''), (template->'urls')::text FROM crawl_schedule ORDER BY created_at");
    std::vector<ScheduleRow> out;
    for (const auto& row : r) {
        ScheduleRow s;
        s.id = row[0].as<std::string>();
        s.schedule = row[1].as<std::string>();
        s.enabled = row[2].as<bool>();
        s.next_run_at = row[3].as<std::string>();
        s.last_run_at = row[4].as<std::string>();
        s.label = row[5].as<std::string>();
        s.urls = nlohmann::json::parse(row[6].as<std::string>()).get<std::vector<std::string>>();
        out.push_back(std::move(s));
    }
    return out;
}

bool set_schedule_enabled(pqxx::connection& conn, const std::string& id, bool enabled)
{
    pqxx::work tx(conn);
    auto r = tx.exec_params("UPDATE crawl_schedule SET enabled = $2, modified_at = now() WHERE id = $1 RETURNING 1",
                            id, enabled);
    if (!r.empty()) {
        Event e{enabled ? "schedule.enabled" : "schedule.disabled",
                fmt::format("schedule {} {} by operator", id, enabled ? "enabled" : "disabled")};
        e.detail = {{"schedule_id", id}};
        record_event(tx, "cli", e);
    }
    tx.commit();
    return !r.empty();
}

int enqueue_due_schedules(pqxx::connection& conn)
{
    return ride_out(conn, [&]() -> int {
        // Nearly every wake-up finds no schedule due: one read in autocommit instead of
        // BEGIN, SELECT ... FOR UPDATE and COMMIT on the path from `add` to a worker.
        if (!exec_autocommit(conn, "schedules.any_due",
                             "SELECT EXISTS (SELECT 1 FROM crawl_schedule WHERE enabled AND next_run_at <= now())")[0][0]
                 .as<bool>()) {
            return 0;
        }
        int added = 0;
        pqxx::work tx(conn);
        auto due = tx.exec("SELECT id, schedule, template::text, extract(epoch FROM next_run_at)::float8 "
                           "FROM crawl_schedule WHERE enabled AND next_run_at <= now() "
                           "ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED");
        for (const auto& row : due) {
            auto id = row[0].as<std::string>();
            auto tick = row[3].as<double>();
            std::string error;
            auto cron = CronSchedule::parse(row[1].as<std::string>(), &error);
            // A schedule that was down for a while runs once, not once per missed tick.
            auto next = cron ? cron->next_after(std::max(static_cast<std::time_t>(tick), std::time(nullptr)))
                             : std::nullopt;
            if (!next) {
                // An expression this binary refuses (stored by an older one, or by hand),
                // such as one that never matches: disabled, not run at a made-up time
                // and not skipped. Skipped, it would stay due and be read again at every
                // poll of every orchestrator while `schedule list` showed it enabled;
                // disabled, the list, the journal and `status` say so until it is replaced.
                if (error.empty()) {
                    error = "it has no next run time";
                }
                log::error("disabling schedule with an invalid expression", {{"schedule", id}, {"error", error}});
                tx.exec_params0("UPDATE crawl_schedule SET enabled = false, modified_at = now() WHERE id = $1", id);
                Event e{"schedule.disabled", "schedule disabled: its expression is invalid: " + error};
                e.detail = {{"schedule_id", id}, {"schedule", row[1].as<std::string>()}};
                record_event(tx, "orchestrator", e);
                continue;
            }
            tx.exec_params0("UPDATE crawl_schedule SET last_run_at = next_run_at, next_run_at = to_timestamp($2), "
                            " modified_at = now() WHERE id = $1",
                            id, static_cast<double>(*next));
            auto tmpl = nlohmann::json::parse(row[2].as<std::string>());
            auto r = tx.exec_params(
                "INSERT INTO crawl (urls, max_depth, max_urls, timeout_s, label, tags, config, schedule_id, "
                " schedule_due_at, max_per_host, host_delay_s, scope) "
                "SELECT ARRAY(SELECT jsonb_array_elements_text(t->'urls')), coalesce((t->>'max_depth')::int, 0), "
                " (t->>'max_urls')::int, (t->>'timeout_s')::int, t->>'label', "
                " ARRAY(SELECT jsonb_array_elements_text(coalesce(t->'tags', '[]'))), coalesce(t->'config', '{}'), "
                " $2, to_timestamp($3), (t->>'max_per_host')::int, "
                " (t->>'host_delay_s')::float8, "
                // A schedule added before scopes has none: its crawls follow every link, as they did.
                " coalesce(t->>'scope', 'any') FROM (SELECT $1::jsonb AS t) x "
                "ON CONFLICT (schedule_id, schedule_due_at) WHERE schedule_id IS NOT NULL DO NOTHING RETURNING id",
                tmpl.dump(), id, tick);
            added += static_cast<int>(r.size());
            if (!r.empty()) {
                log::info("schedule enqueued a crawl", {{"schedule", id}, {"crawl", r[0][0].as<std::string>()}});
                Event e{"crawl.added", "crawl added by its schedule", r[0][0].as<std::string>()};
                e.detail = {{"schedule_id", id}, {"urls", tmpl["urls"].size()}};
                record_event(tx, "orchestrator", e);
            }
        }
        tx.commit();
        return added;
    });
}

} // namespace orch
