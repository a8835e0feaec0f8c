// Crawl schedules: cron parsing, the schedule commands, and a due schedule
// enqueuing exactly one crawl with two orchestrators running.

#include "orchestrator/cron.hpp"
#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <ctime>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

namespace {

std::time_t utc(int year, int month, int day, int hour, int minute)
{
    std::tm tm{};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    return ::timegm(&tm);
}

std::time_t next_run(const std::string& expr, std::time_t after)
{
    std::string error;
    auto s = CronSchedule::parse(expr, &error);
    INFO(expr << ": " << error);
    REQUIRE(s);
    auto next = s->next_after(after);
    REQUIRE(next);
    return *next;
}

std::string parse_error(const std::string& expr)
{
    std::string error;
    auto s = CronSchedule::parse(expr, &error);
    INFO(expr);
    CHECK_FALSE(s);
    return error;
}

} // namespace

TEST_CASE("cron: aliases steps ranges lists and intervals", "[orchestrator][schedules][cron]")
{
    auto t = utc(2024, 1, 6, 10, 7); // a Saturday
    CHECK(next_run("@hourly", t) == utc(2024, 1, 6, 11, 0));
    CHECK(next_run("@daily", t) == utc(2024, 1, 7, 0, 0));
    CHECK(next_run("@midnight", t) == utc(2024, 1, 7, 0, 0));
    CHECK(next_run("@weekly", t) == utc(2024, 1, 7, 0, 0)); // Sunday
    CHECK(next_run("@monthly", t) == utc(2024, 2, 1, 0, 0));
    CHECK(next_run("@yearly", t) == utc(2025, 1, 1, 0, 0));
    CHECK(next_run("@annually", t) == utc(2025, 1, 1, 0, 0));
    CHECK(next_run("*/15 * * * *", t) == utc(2024, 1, 6, 10, 15));
    CHECK(next_run("5/20 * * * *", t) == utc(2024, 1, 6, 10, 25));
    CHECK(next_run("0 9-17/4 * * *", t) == utc(2024, 1, 6, 13, 0));
    CHECK(next_run("0 9 * * 1-5", t) == utc(2024, 1, 8, 9, 0));        // next weekday
    CHECK(next_run("30 6 1,15 * *", t) == utc(2024, 1, 15, 6, 30));
    CHECK(next_run("0 0 * * 7", t) == utc(2024, 1, 7, 0, 0));          // 7 is Sunday too
    CHECK(next_run("0 0 13 * 5", t) == utc(2024, 1, 12, 0, 0));        // day or weekday: Friday the 12th first
    // "*/1" in a day field is unrestricted (Vixie cron): weekday alone decides.
    CHECK(next_run("0 0 */1 * 1", t) == utc(2024, 1, 8, 0, 0));
    CHECK(next_run("0 0 13 * */1", t) == utc(2024, 1, 13, 0, 0));
    CHECK(next_run("0 0 29 2 *", utc(2024, 3, 1, 0, 0)) == utc(2028, 2, 29, 0, 0));
    // February 29 on a Sunday ("*/7" keeps the weekday field unrestricted: both must
    // match): eight years away, beyond any window shorter than the 400-year cycle.
    CHECK(next_run("0 0 29 2 */7", utc(2024, 3, 1, 0, 0)) == utc(2032, 2, 29, 0, 0));
    CHECK(next_run("0 0 1 2 */1", utc(2024, 3, 1, 0, 0)) == utc(2025, 2, 1, 0, 0));
    CHECK(next_run("0 0 31 1-12 *", utc(2024, 1, 31, 0, 0)) == utc(2024, 3, 31, 0, 0));
    CHECK(next_run("* * * * *", utc(2024, 12, 31, 23, 59)) == utc(2025, 1, 1, 0, 0));
    CHECK(next_run("  0   12 * * *  ", t) == utc(2024, 1, 6, 12, 0)); // extra blanks
    CHECK(next_run("@every 90s", t) == t + 90);
    CHECK(next_run("@every 30m", t) == t + 1800);
    CHECK(next_run("@every 1h", t) == t + 3600);
    CHECK(next_run("@every 2d", t) == t + 2 * 86400);
}

TEST_CASE("cron: invalid expressions are refused with a clear error", "[orchestrator][schedules][cron]")
{
    CHECK_THAT(parse_error(""), Catch::Contains("not a cron expression"));
    CHECK_THAT(parse_error("* * * *"), Catch::Contains("5 fields"));
    CHECK_THAT(parse_error("* * * * * *"), Catch::Contains("5 fields"));
    CHECK_THAT(parse_error("60 * * * *"), Catch::Contains("invalid cron expression '60 * * * *'"));
    CHECK_THAT(parse_error("* 24 * * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("* * 0 * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("* * * 13 *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("* * * * 8"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("*/0 * * * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("5-1 * * * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("1,,2 * * * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("a * * * *"), Catch::Contains("invalid cron expression"));
    CHECK_THAT(parse_error("-1 * * * *"), Catch::Contains("invalid cron expression"));
    // Each field is valid, but no date has them all: refused, never run on a made-up day.
    for (const char* never : {"* * 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 31 6,9,11 *", "0 0 30,31 2 */7"}) {
        CHECK_THAT(parse_error(never), Catch::Contains(std::string("cron expression '") + never + "' never matches"));
    }
    CHECK_THAT(parse_error("@often"), Catch::Contains("unknown schedule alias '@often'"));
    CHECK_THAT(parse_error("@every"), Catch::Contains("unknown schedule alias"));
    CHECK_THAT(parse_error("@every 5x"), Catch::Contains("invalid interval unit"));
    CHECK_THAT(parse_error("@every 0m"), Catch::Contains("invalid interval"));
    CHECK_THAT(parse_error("@every m"), Catch::Contains("invalid interval"));
    CHECK_THAT(parse_error("@every -5m"), Catch::Contains("invalid interval"));
}

TEST_CASE("schedules: a due schedule enqueues exactly one crawl with two orchestrators running (list - disable - enable)",
          "[orchestrator][schedules]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0.1);
    auto cli = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", f.db.url(),
                                         "--data-dir", f.data.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    };

    auto bad = cli({"schedule", "add", "--every", "61 * * * *", "http://sched.test/"});
    CHECK(bad.exit_code == 7);
    CHECK_THAT(bad.err, Catch::Contains("invalid cron expression '61 * * * *'"));
    CHECK(cli({"schedule", "disable", "00000000-0000-0000-0000-000000000000"}).exit_code == 6);

    // A crawl config the workers would refuse is refused here, as by `add`.
    auto refused = cli({"schedule", "add", "--every", "@daily", "--config", R"({"url_allow": "("})",
                         "http://sched.test/"});
    CHECK(refused.exit_code == 7);
    CHECK_THAT(refused.err, Catch::Contains("url_allow"));
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 0);

    auto added = cli({"schedule", "add", "--every", "@every 1h", "--label", "hourly", "--max-per-host", "3", "--host-delay", "1.5", "--config",
                      R"({"url_deny": "/private/"})", "http://sched.test/"});
    INFO(added.err);
    REQUIRE(added.exit_code == 0);
    auto id = added.out.substr(0, added.out.find('\n'));
    REQUIRE(id.size() == 36);
    auto listed = cli({"schedule", "list", "--json"});
    REQUIRE(listed.exit_code == 0);
    auto row = nlohmann::json::parse(listed.out.substr(0, listed.out.find('\n')));
    CHECK(row["id"] == id);
    CHECK(row["schedule"] == "@every 1h");
    CHECK(row["enabled"] == true);
    CHECK(row["label"] == "hourly");
    CHECK(row["urls"] == nlohmann::json::array({"http://sched.test/"}));
    CHECK(f.count("SELECT count(*) FROM crawl_schedule WHERE next_run_at BETWEEN now() + interval '59 min' "
                  "AND now() + interval '61 min'") == 1);

    auto a = f.start({"--daemon", "--poll-interval", "1"}, "machine-a", f.root / "data-a");
    auto b = f.start({"--daemon", "--poll-interval", "1"}, "machine-b", f.root / "data-b");
    REQUIRE(f.wait_registered(a->pid()));
    REQUIRE(f.wait_registered(b->pid()));
    auto qid = f.quote(id);
    f.exec("UPDATE crawl_schedule SET next_run_at = now() WHERE id = " + qid);
    bool sealed = eventually(
        [&] {
            return f.count("SELECT count(*) FROM crawl WHERE schedule_id = " + qid + " AND status = 'sealed'") >= 1;
        },
        30s);
    INFO("a: " << describe(*a));
    INFO("b: " << describe(*b));
    REQUIRE(sealed);
    // Both orchestrators polled several times meanwhile (1 s poll, a crawl takes longer).
    CHECK(f.count("SELECT count(*) FROM crawl WHERE schedule_id = " + qid) == 1);
    CHECK(f.count("SELECT count(*) FROM crawl") == 1);
    CHECK(f.rows("SELECT c.label, c.urls::text, c.outcome, c.config->>'url_deny', c.max_per_host, c.host_delay_s FROM crawl c") ==
          std::vector<std::vector<std::string>>{{"hourly", "{http://sched.test/}", "succeeded", "/private/", "3", "1.5"}});
    CHECK(f.count("SELECT count(*) FROM crawl_schedule WHERE last_run_at IS NOT NULL "
                  "AND next_run_at > now() + interval '59 min'") == 1);
    a->signal(SIGTERM);
    b->signal(SIGTERM);
    REQUIRE(a->wait_for(15s));
    REQUIRE(b->wait_for(15s));
    CHECK(a->exit_code() == 0);
    CHECK(b->exit_code() == 0);

    // Disabled: due again, but a one-shot orchestrator enqueues nothing.
    auto disabled = cli({"schedule", "disable", id});
    INFO(disabled.err);
    REQUIRE(disabled.exit_code == 0);
    listed = cli({"schedule", "list", "--json"});
    CHECK(nlohmann::json::parse(listed.out.substr(0, listed.out.find('\n')))["enabled"] == false);
    f.exec("UPDATE crawl_schedule SET next_run_at = now() WHERE id = " + qid);
    auto once = f.run({}, "machine-c");
    INFO(describe(*once));
    CHECK(once->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM crawl") == 1);
    // Enabled again: the one-shot run enqueues the due tick and crawls it.
    REQUIRE(cli({"schedule", "enable", id}).exit_code == 0);
    auto again = f.run({}, "machine-c");
    INFO(describe(*again));
    CHECK(again->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM crawl WHERE status = 'sealed' AND outcome = 'succeeded'") == 2);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("schedules: an expression that never matches is refused by schedule add - one stored before is disabled "
          "by the orchestrator - never run daily",
          "[orchestrator][schedules]")
{
    OrchFixture f;
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0.1);
    auto cli = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", f.db.url(),
                                         "--data-dir", f.data.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    };
    for (const char* never : {"* * 31 2 *", "0 0 30 2 *", "0 0 31 4 *"}) {
        auto r = cli({"schedule", "add", "--every", never, "http://never.test/"});
        INFO(never << ": " << r.err);
        CHECK(r.exit_code == 7);
        CHECK_THAT(r.err, Catch::Contains("never matches"));
    }
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 0);
    CHECK(f.count("SELECT count(*) FROM event") == 0);

    // One stored by an older binary (which gave it "tomorrow"), now due.
    f.exec("INSERT INTO crawl_schedule (template, schedule, next_run_at) VALUES ("
           "'{\"urls\": [\"http://never.test/\"], \"max_depth\": 0, \"config\": {}, \"tags\": []}', "
           "'0 0 30 2 *', now() - interval '1 minute')");
    auto once = f.run({}, "machine-a");
    INFO(describe(*once));
    CHECK(once->exit_code() == 0);
    CHECK(f.count("SELECT count(*) FROM crawl") == 0);
    CHECK(f.rows("SELECT enabled::text, (last_run_at IS NULL)::text, (next_run_at < now())::text FROM crawl_schedule") ==
          std::vector<std::vector<std::string>>{{"false", "true", "true"}});
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'schedule.disabled' AND actor = 'orchestrator' "
                  "AND message LIKE '%never matches%' AND detail->>'schedule' = '0 0 30 2 *'") == 1);
    auto listed = cli({"schedule", "list", "--json"});
    REQUIRE(listed.exit_code == 0);
    CHECK(nlohmann::json::parse(listed.out.substr(0, listed.out.find('\n')))["enabled"] == false);
}

TEST_CASE("schedules: schedule add --id is idempotent - the same schedule again adds nothing - another one under "
          "its id is refused with code 7",
          "[orchestrator][schedules]")
{
    OrchFixture f;
    auto cli = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", f.db.url(),
                                         "--data-dir", f.data.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    };
    const std::string id = "5d7c1e2a-3b4f-4a6e-8c9d-0e1f2a3b4c5d";
    const std::vector<std::string> daily{"schedule", "add", "--every", "@daily", "--label", "d", "--id", id,
                                         "http://sched-id.test/"};
    auto first = cli(daily);
    INFO(first.err);
    REQUIRE(first.exit_code == 0);
    CHECK(first.out == id + "\n");
    auto again = cli(daily);
    INFO(again.err);
    CHECK(again.exit_code == 0);
    CHECK(again.out == id + "\n");
    CHECK_THAT(again.err, Catch::Contains("exists already with this expression"));
    for (const auto& other : std::vector<std::vector<std::string>>{
             {"--every", "@hourly", "--label", "d", "http://sched-id.test/"},
             {"--every", "@daily", "--label", "e", "http://sched-id.test/"},
             {"--every", "@daily", "--label", "d", "http://sched-id.test/", "--depth", "1"},
             {"--every", "@daily", "--label", "d", "http://other.test/"}}) {
        std::vector<std::string> args{"schedule", "add", "--id", id};
        args.insert(args.end(), other.begin(), other.end());
        auto r = cli(args);
        INFO(r.err);
        CHECK(r.exit_code == 7);
        CHECK_THAT(r.err, Catch::Contains("exists already with another expression"));
    }
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 1);
    CHECK(f.count("SELECT count(*) FROM event WHERE kind = 'schedule.added'") == 1);
    CHECK(cli({"schedule", "add", "--every", "@daily", "--id", "x", "http://sched-id.test/"}).exit_code == 7);
    // Without --id, each add is a schedule of its own.
    CHECK(cli({"schedule", "add", "--every", "@daily", "http://sched-id.test/"}).exit_code == 0);
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 2);
}
