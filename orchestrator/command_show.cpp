#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "orchestrator/event_table.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace orch {
namespace {

constexpr const char* k_crawl =
    "SELECT jsonb_build_object('id', c.id, 'urls', c.urls, 'label', c.label, 'tags', c.tags, 'status', c.status,"
    "  'outcome', c.outcome, 'seal_reason', c.seal_reason, 'max_depth', c.max_depth, 'max_urls', c.max_urls,"
    "  'max_per_host', c.max_per_host, 'host_delay_s', c.host_delay_s,"
    "  'attempts', c.attempts, 'lease_owner', c.lease_owner, 'cancel_requested_at', c.cancel_requested_at,"
    "  'created_at', c.created_at, 'started_at', c.started_at, 'sealed_at', c.sealed_at, 'sealed_by', c.sealed_by,"
    "  'paused_at', c.paused_at, 'paused_s', c.paused_s,"
    "  'snapshots', jsonb_build_object('total', p.snapshots, 'queued', p.queued, 'started', p.started,"
    "     'sealed', p.sealed, 'succeeded', p.succeeded, 'partial', p.partial, 'failed', p.failed,"
    "     'cancelled', p.cancelled, 'timed_out', p.timed_out),"
    "  'rate_per_min', p.rate_per_min, 'eta_s', extract(epoch FROM p.eta)::float8,"
    "  'running_s', p.running_s, 'avg_rate_per_min', p.avg_rate_per_min)::text "
    "FROM crawl c JOIN ops.crawl_progress p ON p.crawl_id = c.id WHERE c.id = $1";
// Per hook over the crawl's snapshots: how many results in each status.
constexpr const char* k_crawl_hooks =
    "SELECT jsonb_build_object('plugin', ar.plugin, 'hook_name', ar.hook_name, 'total', count(*),"
    "  'succeeded', count(*) FILTER (WHERE ar.status = 'succeeded'),"
    "  'failed', count(*) FILTER (WHERE ar.status = 'failed'),"
    "  'skipped', count(*) FILTER (WHERE ar.status = 'skipped'),"
    "  'noresults', count(*) FILTER (WHERE ar.status = 'noresults'),"
    "  'pending', count(*) FILTER (WHERE ar.status IN ('queued', 'started')),"
    "  'last_error', (array_agg(ar.error ORDER BY ar.end_ts DESC NULLS LAST) FILTER (WHERE ar.error IS NOT NULL))[1]"
    ")::text "
    "FROM archive_result ar JOIN snapshot s ON s.id = ar.snapshot_id WHERE s.crawl_id = $1 "
    "GROUP BY ar.plugin, ar.hook_name ORDER BY ar.hook_name";
// Per host of a crawl with per-host rules (ops.crawl_hosts, migration 0019): its
// running and waiting snapshots and its last claim, the busiest 10.
constexpr const char* k_crawl_hosts =
    "SELECT jsonb_build_object('host', host, 'running', running, 'waiting', waiting,"
    "  'last_claimed_at', last_claimed_at)::text "
    "FROM ops.crawl_hosts WHERE crawl_id = $1 ORDER BY running DESC, waiting DESC, host LIMIT 10";
// The crawl's journal, oldest first (the newest 20).
const std::string k_crawl_events = std::string("SELECT j FROM (SELECT e.id, ") + k_event_json +
                                   "::text AS j FROM ops.events e WHERE e.crawl_id = $1 "
                                   "ORDER BY e.id DESC LIMIT 20) newest ORDER BY id";
constexpr const char* k_snapshot =
    "SELECT jsonb_build_object('id', s.id, 'crawl_id', s.crawl_id, 'url', s.url, 'depth', s.depth, 'title', s.title,"
    "  'status', s.status, 'outcome', s.outcome, 'error', s.error, 'attempts', s.attempts,"
    "  'lease_owner', s.lease_owner, 'created_at', s.created_at, 'started_at', s.started_at,"
    "  'sealed_at', s.sealed_at, 'sealed_by', s.sealed_by)::text "
    "FROM snapshot s WHERE s.id = $1";
constexpr const char* k_snapshot_hooks =
    "SELECT jsonb_build_object('id', ar.id, 'plugin', ar.plugin, 'hook_name', ar.hook_name, 'status', ar.status,"
    "  'attempts', ar.attempts, 'duration_s', extract(epoch FROM ar.end_ts - ar.start_ts)::float8,"
    "  'output_str', ar.output_str, 'output_size', ar.output_size, 'error', ar.error,"
    "  'process_id', ar.process_id, 'exit_code', p.exit_code, 'term_signal', p.term_signal,"
    "  'end_reason', p.end_reason, 'cpu_s', p.cpu_user_s + p.cpu_system_s)::text "
    "FROM archive_result ar LEFT JOIN process p ON p.id = ar.process_id "
    "WHERE ar.snapshot_id = $1 ORDER BY ar.hook_name";

nlohmann::json one_json(pqxx::read_transaction& tx, const char* statement, const std::string& id)
{
    auto r = tx.exec_prepared(statement, id);
    return r.empty() ? nlohmann::json() : nlohmann::json::parse(r[0][0].as<std::string>());
}

nlohmann::json json_rows(pqxx::read_transaction& tx, const char* statement, const std::string& id)
{
    auto out = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared(statement, id)) {
        out.push_back(nlohmann::json::parse(row[0].as<std::string>()));
    }
    return out;
}

// A field as its cell (table_format.hpp), under a short name: this file prints dozens.
std::string str(const nlohmann::json& j, const char* key)
{
    return field_text(j, key);
}

// The seed URLs: all of them when few, else the first three and how many more
// (--json has the whole list).
std::string url_summary(const nlohmann::json& urls)
{
    constexpr std::size_t k_shown = 3;
    if (urls.size() <= k_shown + 1) {
        return urls.dump();
    }
    std::string out;
    for (std::size_t i = 0; i < k_shown; ++i) {
        out += (i ? " " : "") + urls[i].get<std::string>();
    }
    return fmt::format("{} (+{} more of {}; --json lists them all)", out, urls.size() - k_shown, urls.size());
}

std::string per_minute(double rate)
{
    return rate >= 100 ? fmt::format("{:.0f}/min", rate) : fmt::format("{:.1f}/min", rate);
}

// How fast it goes, and when it should be done: the rate over the last 10
// minutes of its run (ops.crawl_progress), its average over its whole running
// time, and the ETA at the recent rate. A sealed crawl has only its average; a
// paused one has no ETA.
std::string rate_line(const nlohmann::json& c)
{
    const auto number = [&c](const char* key) {
        return c[key].is_number() ? std::optional(c[key].get<double>()) : std::nullopt;
    };
    const auto recent = number("rate_per_min");
    const auto average = number("avg_rate_per_min");
    const auto running = number("running_s");
    const auto status = str(c, "status");
    if (!running) {
        return "- (not started)";
    }
    const std::string over = fmt::format("{} on average over {} of running", average ? per_minute(*average) : "-",
                                         format_duration(running));
    if (status == "sealed") {
        return over;
    }
    std::string line = fmt::format("{} in its last 10 min, {}", per_minute(recent.value_or(0)), over);
    if (status == "paused") {
        return line + "; no eta while paused";
    }
    const auto eta = number("eta_s");
    return line + "; eta " + (eta ? format_duration(eta) : std::string("- (nothing sealed in the last 10 min)"));
}

// " by <process id>" when the row names the worker whose seal it was.
std::string sealed_by(const nlohmann::json& row)
{
    return row["sealed_by"].is_string() ? " by " + row["sealed_by"].get<std::string>() : std::string();
}

void print_crawl(const nlohmann::json& c)
{
    const auto& n = c["snapshots"];
    std::cout << fmt::format("crawl     {}\nlabel     {}\nstatus    {}{}\nurls      {}\ncreated   {}\nstarted   {}\n"
                             "sealed    {}\n",
                             str(c, "id"), str(c, "label"), str(c, "status"),
                             c["outcome"].is_null() ? "" : " (" + str(c, "outcome") + ")", url_summary(c["urls"]),
                             str(c, "created_at"), str(c, "started_at"), str(c, "sealed_at") + sealed_by(c));
    if (!c["max_per_host"].is_null() || !c["host_delay_s"].is_null()) {
        std::string rules;
        if (!c["max_per_host"].is_null()) {
            rules = fmt::format("at most {} snapshot(s) at once", str(c, "max_per_host"));
        }
        if (!c["host_delay_s"].is_null()) {
            rules += fmt::format("{}{} between two starts", rules.empty() ? "" : ", ",
                                 format_duration(c["host_delay_s"].get<double>()));
        }
        std::cout << "per host  " << rules << '\n';
    }
    if (!c["cancel_requested_at"].is_null()) {
        std::cout << "cancel    requested at " << str(c, "cancel_requested_at") << '\n';
    }
    if (str(c, "status") == "paused") {
        std::cout << fmt::format("paused    since {} until `orchestrator resume {}` (why: the crawl.paused event "
                                 "below)\n",
                                 str(c, "paused_at"), str(c, "id"));
    }
    if (c["paused_s"].is_number() && c["paused_s"].get<double>() > 0) {
        std::cout << fmt::format("pauses    {} in all (not counted against its timeout)\n",
                                 format_duration(c["paused_s"].get<double>()));
    }
    std::cout << fmt::format("snapshots {} total: {} queued, {} started, {} sealed ({} succeeded, {} partial, "
                             "{} failed, {} cancelled, {} timed out)\n",
                             str(n, "total"), str(n, "queued"), str(n, "started"), str(n, "sealed"),
                             str(n, "succeeded"), str(n, "partial"), str(n, "failed"), str(n, "cancelled"),
                             str(n, "timed_out"));
    std::cout << "rate      " << rate_line(c) << '\n';
    if (c.contains("hosts") && !c["hosts"].empty()) {
        TextTable hosts({"HOST", "RUNNING", "WAITING", "LAST START"});
        for (const auto& h : c["hosts"]) {
            const auto& last = h["last_claimed_at"];
            hosts.add_row({str(h, "host"), str(h, "running"), str(h, "waiting"),
                           last.is_string() ? short_timestamp(last.get<std::string>()) : "-"});
        }
        std::cout << '\n';
        hosts.print(std::cout);
    }
    TextTable table({"HOOK", "PLUGIN", "TOTAL", "OK", "FAILED", "SKIPPED", "NORESULTS", "PENDING", "LAST ERROR"});
    for (const auto& h : c["hooks"]) {
        table.add_row({str(h, "hook_name"), str(h, "plugin"), str(h, "total"), str(h, "succeeded"), str(h, "failed"),
                       str(h, "skipped"), str(h, "noresults"), str(h, "pending"),
                       h["last_error"].is_null() ? "" : one_line(h["last_error"].get<std::string>(), 60)});
    }
    if (!table.empty()) {
        std::cout << '\n';
        table.print(std::cout);
    }
    if (!c["events"].empty()) {
        std::cout << '\n';
        print_event_table(std::cout, c["events"], false);
    }
}

void print_snapshot(const nlohmann::json& s)
{
    std::cout << fmt::format("snapshot  {}\ncrawl     {}\nurl       {}\ntitle     {}\nstatus    {}{}\nattempts  {}\n",
                             str(s, "id"), str(s, "crawl_id"), str(s, "url"), str(s, "title"), str(s, "status"),
                             s["outcome"].is_null() ? "" : " (" + str(s, "outcome") + ")", str(s, "attempts"));
    if (!s["sealed_at"].is_null()) {
        std::cout << "sealed    " << str(s, "sealed_at") << sealed_by(s) << '\n';
    }
    if (!s["error"].is_null()) {
        std::cout << "error     " << one_line(s["error"].get<std::string>(), 200) << '\n';
    }
    TextTable table({"HOOK", "PLUGIN", "STATUS", "TIME", "CPU", "EXIT", "PROCESS", "OUTPUT / ERROR"});
    for (const auto& h : s["hooks"]) {
        auto duration = h["duration_s"].is_null() ? std::nullopt : std::optional(h["duration_s"].get<double>());
        auto exit_code = h["exit_code"].is_null() ? std::nullopt : std::optional(h["exit_code"].get<int>());
        auto signal = h["term_signal"].is_null() ? std::nullopt : std::optional(h["term_signal"].get<int>());
        auto cpu = h["cpu_s"].is_null() ? std::nullopt : std::optional(h["cpu_s"].get<double>());
        auto detail = !h["error"].is_null() ? h["error"].get<std::string>()
                                            : h["output_str"].is_null() ? "" : h["output_str"].get<std::string>();
        table.add_row({str(h, "hook_name"), str(h, "plugin"), str(h, "status"), format_duration(duration),
                       format_cpu(cpu), format_exit(exit_code, signal), str(h, "process_id"), one_line(detail, 60)});
    }
    if (!table.empty()) {
        std::cout << '\n';
        table.print(std::cout);
    }
}

} // namespace

void command_show(const CommonOptions& options, const ShowOptions& show)
{
    bool crawl = show.kind == "crawl";
    auto id = require_uuid(show.id, crawl ? "crawl id" : "snapshot id");
    OpsSession session(options, OpsSession::Schema::current,
                       {{"show_crawl", k_crawl}, {"show_crawl_hooks", k_crawl_hooks}, {"show_crawl_events", k_crawl_events},
                        {"show_crawl_hosts", k_crawl_hosts}, {"show_snapshot", k_snapshot},
                        {"show_snapshot_hooks", k_snapshot_hooks}});
    pqxx::read_transaction tx(session.conn());
    auto item = one_json(tx, crawl ? "show_crawl" : "show_snapshot", id);
    if (item.is_null()) {
        throw NotFound(fmt::format("{} {} not found", show.kind, id));
    }
    item["hooks"] = json_rows(tx, crawl ? "show_crawl_hooks" : "show_snapshot_hooks", id);
    if (crawl) {
        item["events"] = json_rows(tx, "show_crawl_events", id);
        if (!item["max_per_host"].is_null() || !item["host_delay_s"].is_null()) {
            item["hosts"] = json_rows(tx, "show_crawl_hosts", id);
        }
    }
    tx.commit();
    if (show.json) {
        std::cout << item.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else if (crawl) {
        print_crawl(item);
    } else {
        print_snapshot(item);
    }
}

} // namespace orch
