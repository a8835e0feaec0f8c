#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/db/machine.hpp"
#include "common/supervision/process_identity.hpp"
#include "orchestrator/event_table.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace orch {
namespace {

// A heartbeat older than this (the supervisor beats every 10 s) is reported as stale.
constexpr double k_stale_heartbeat_s = 60.0;
// How many crawls being run `status` lists.
constexpr std::size_t k_active_crawls_shown = 10;

constexpr const char* k_orchestrators =
    "SELECT id, machine_id, coalesce(data_dir, ''), pid, coalesce(boot_id, ''), coalesce(start_ticks, 0), pidfs_ino, "
    "       cookie, started_at::text, extract(epoch FROM now() - started_at)::float8, "
    "       extract(epoch FROM now() - heartbeat_at)::float8 "
    "FROM process WHERE process_type = 'orchestrator' AND status = 'running' "
    "ORDER BY machine_id = $1 DESC, machine_id, started_at";
constexpr const char* k_queue_counts =
    "SELECT entity, status, count FROM ops.state_counts WHERE entity IN ('crawl', 'snapshot') ORDER BY 1, 2";
constexpr const char* k_running =
    "SELECT type, count(*) FROM ops.process_running WHERE type <> 'orchestrator' GROUP BY type ORDER BY type";
constexpr const char* k_recent_failures =
    "SELECT id, ended_at::text, type, outcome, exit_code, signal, coalesce(end_reason, ''), "
    "       coalesce(hook_name, ''), coalesce(crawl_id::text, ''), coalesce(snapshot_id::text, ''), "
    "       coalesce(stderr_tail, '') "
    "FROM ops.process_exits "
    "WHERE outcome <> 'ok' AND end_reason IS DISTINCT FROM 'killed_on_teardown' "
    "  AND ended_at > now() - interval '24 hours' "
    "ORDER BY ended_at DESC LIMIT $1";
// The crawls being run or paused, oldest start first, with their progress. The
// view is read once per crawl (a subquery per row), so that it counts only their
// own snapshots, whatever the history.
constexpr const char* k_active_crawls =
    "SELECT (SELECT jsonb_build_object('id', p.crawl_id, 'label', p.label, 'status', p.status,"
    "          'cancelling', p.cancel_requested_at IS NOT NULL, 'snapshots', p.snapshots, 'sealed', p.sealed,"
    "          'failed', p.failed, 'partial', p.partial, 'rate_per_min', p.rate_per_min,"
    "          'eta_s', extract(epoch FROM p.eta)::float8, 'running_s', p.running_s)"
    "        FROM ops.crawl_progress p WHERE p.crawl_id = c.id)::text "
    "FROM crawl c WHERE c.status IN ('started', 'paused') ORDER BY c.started_at NULLS LAST, c.id LIMIT $1";
// The journal's last day, without the routine life of crawls that went well:
// operator actions, give-ups, releases, back-offs, recoveries, starts and stops.
const std::string k_recent_events =
    std::string("SELECT ") + k_event_json + "::text FROM ops.events e "
    "WHERE e.at > now() - interval '24 hours' AND e.kind NOT IN ('crawl.added', 'crawl.started', 'crawl.sealed') "
    "ORDER BY e.id DESC LIMIT $1";

template <typename T>
nlohmann::json json_or_null(const pqxx::field& f)
{
    return f.is_null() ? nlohmann::json(nullptr) : nlohmann::json(f.as<T>());
}

// Whether the row's process is alive, checked by its full identity (not just the pid).
bool verified_alive(const pqxx::row& row, const std::string& boot_id)
{
    if (row[3].is_null()) {
        return false;
    }
    ProcessIdentity expected;
    expected.pid = row[3].as<pid_t>();
    expected.boot_id = row[4].as<std::string>();
    expected.start_ticks = row[5].as<std::uint64_t>();
    if (!row[6].is_null()) {
        expected.pidfs_ino = row[6].as<std::uint64_t>();
    }
    if (!row[7].is_null()) {
        expected.cookie = row[7].as<std::string>();
    }
    return verify_identity(expected, boot_id).verdict == IdentityVerdict::same;
}

void print_failures(const nlohmann::json& failures)
{
    if (failures.empty()) {
        std::cout << "recent failures (24h): none\n";
        return;
    }
    std::cout << "recent failures (24h):\n";
    TextTable table({"ENDED", "TYPE", "ID", "OUTCOME", "EXIT", "REASON", "STDERR"});
    for (const auto& f : failures) {
        auto type = f["type"].get<std::string>();
        if (!f["hook_name"].get<std::string>().empty()) {
            type += " " + f["hook_name"].get<std::string>();
        }
        table.add_row({f["ended_at"].get<std::string>().substr(0, 19), type, f["id"].get<std::string>(),
                       f["outcome"].get<std::string>(),
                       format_exit(f["exit_code"].is_null() ? std::nullopt : std::optional(f["exit_code"].get<int>()),
                                   f["signal"].is_null() ? std::nullopt : std::optional(f["signal"].get<int>())),
                       f["end_reason"].get<std::string>(), last_line(f["stderr_tail"].get<std::string>(), 60)});
    }
    table.print(std::cout);
}

// Crawls being run or paused, one line each; nothing when there are none.
void print_active_crawls(const nlohmann::json& crawls)
{
    if (crawls.empty()) {
        return;
    }
    std::cout << "active crawls" << (crawls.size() == k_active_crawls_shown ? " (the oldest " +
                                         std::to_string(k_active_crawls_shown) + "; orchestrator crawls for all)"
                                                                           : std::string()) << ":\n";
    TextTable table({"CRAWL", "STATUS", "SEALED", "FAILED", "RATE", "ETA", "RUN", "LABEL"});
    for (const auto& c : crawls) {
        const auto number = [&c](const char* key) {
            return c[key].is_number() ? std::optional(c[key].get<double>()) : std::nullopt;
        };
        const auto status = field_text(c, "status");
        table.add_row({field_text(c, "id"), c["cancelling"].get<bool>() ? status + " (cancelling)" : status,
                       fmt::format("{}/{}", field_text(c, "sealed"), field_text(c, "snapshots")),
                       fmt::format("{}", c["failed"].get<long>() + c["partial"].get<long>()),
                       fmt::format("{:.1f}/min", number("rate_per_min").value_or(0)),
                       status == "paused" ? "paused" : format_duration(number("eta_s")),
                       format_duration(number("running_s")), field_text(c, "label")});
    }
    table.print(std::cout);
}

} // namespace

LsbStatus command_status(const CommonOptions& options, const StatusOptions& status)
{
    OpsSession session(options, OpsSession::Schema::current,
                       {{"status_orchestrators", k_orchestrators}, {"status_queue_counts", k_queue_counts},
                        {"status_running", k_running}, {"status_active_crawls", k_active_crawls},
                        {"status_recent_failures", k_recent_failures}, {"status_recent_events", k_recent_events}});
    auto machine = detect_machine(optional_machine_id(options));
    auto boot_id = read_boot_id();
    pqxx::read_transaction tx(session.conn());

    LsbStatus result = LsbStatus::not_running;
    nlohmann::json orchestrators = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared("status_orchestrators", machine.id)) {
        bool here = row[1].as<std::string>() == machine.id;
        auto heartbeat_age = row[10].is_null() ? std::optional<double>() : row[10].as<double>();
        std::string state = "running";
        if (here) {
            bool alive = verified_alive(row, boot_id);
            state = !alive ? "dead" : (heartbeat_age && *heartbeat_age > k_stale_heartbeat_s) ? "stale_heartbeat"
                                                                                               : "running";
            if (alive) {
                result = LsbStatus::running;
            } else if (result != LsbStatus::running) {
                result = LsbStatus::dead_row;
            }
        } else if (heartbeat_age && *heartbeat_age > k_stale_heartbeat_s) {
            state = "stale_heartbeat";
        }
        orchestrators.push_back({{"id", row[0].as<std::string>()}, {"machine_id", row[1].as<std::string>()},
                                 {"this_machine", here}, {"data_dir", row[2].as<std::string>()},
                                 {"pid", json_or_null<long>(row[3])}, {"started_at", json_or_null<std::string>(row[8])},
                                 {"runtime_s", json_or_null<double>(row[9])},
                                 {"heartbeat_age_s", json_or_null<double>(row[10])}, {"state", state}});
    }
    nlohmann::json queues = {{"crawl", {{"queued", 0}, {"started", 0}, {"paused", 0}, {"sealed", 0}}},
                             {"snapshot", {{"queued", 0}, {"started", 0}, {"sealed", 0}}}};
    for (const auto& row : tx.exec_prepared("status_queue_counts")) {
        queues[row[0].as<std::string>()][row[1].as<std::string>()] = row[2].as<long>();
    }
    nlohmann::json running = nlohmann::json::object();
    for (const auto& row : tx.exec_prepared("status_running")) {
        running[row[0].as<std::string>()] = row[1].as<long>();
    }
    nlohmann::json active = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared("status_active_crawls", k_active_crawls_shown)) {
        active.push_back(nlohmann::json::parse(row[0].c_str()));
    }
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared("status_recent_failures", 5)) {
        failures.push_back({{"id", row[0].as<std::string>()}, {"ended_at", row[1].as<std::string>()},
                            {"type", row[2].as<std::string>()}, {"outcome", row[3].as<std::string>()},
                            {"exit_code", json_or_null<int>(row[4])}, {"signal", json_or_null<int>(row[5])},
                            {"end_reason", row[6].as<std::string>()}, {"hook_name", row[7].as<std::string>()},
                            {"crawl_id", row[8].as<std::string>()}, {"snapshot_id", row[9].as<std::string>()},
                            {"stderr_tail", row[10].as<std::string>()}});
    }
    nlohmann::json events = nlohmann::json::array();
    for (const auto& row : tx.exec_prepared("status_recent_events", 5)) {
        events.push_back(nlohmann::json::parse(row[0].c_str()));
    }
    tx.commit();

    static const char* k_state_names[] = {"running", "dead", "?", "not_running"};
    if (status.json) {
        nlohmann::json out = {{"state", k_state_names[static_cast<int>(result)]},
                              {"machine_id", machine.id},
                              {"orchestrators", orchestrators},
                              {"queues", queues},
                              {"running", running},
                              {"active_crawls", active},
                              {"recent_failures", failures},
                              {"recent_events", events}};
        std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        return result;
    }
    std::cout << fmt::format("orchestrator: {} on this machine ({})\n",
                             result == LsbStatus::running    ? "running"
                             : result == LsbStatus::dead_row ? "not running, but a row says it runs (stale row)"
                                                             : "not running",
                             machine.id);
    if (!orchestrators.empty()) {
        TextTable table({"ID", "MACHINE", "PID", "STATE", "UPTIME", "HEARTBEAT", "DATA DIR"});
        for (const auto& o : orchestrators) {
            table.add_row({o["id"].get<std::string>(), o["machine_id"].get<std::string>() + (o["this_machine"].get<bool>() ? " (here)" : ""),
                           o["pid"].is_null() ? "-" : std::to_string(o["pid"].get<long>()), o["state"].get<std::string>(),
                           format_duration(o["runtime_s"].is_null() ? std::nullopt : std::optional(o["runtime_s"].get<double>())),
                           o["heartbeat_age_s"].is_null() ? "-" : format_duration(o["heartbeat_age_s"].get<double>()) + " ago",
                           o["data_dir"].get<std::string>()});
        }
        table.print(std::cout);
    }
    auto counts = [](const nlohmann::json& by_state, std::initializer_list<const char*> states) {
        std::string out;
        for (const char* s : states) {
            out += fmt::format("{}{} {}", out.empty() ? "" : ", ", by_state.value(s, 0L), s);
        }
        return out;
    };
    std::cout << "crawls:    " << counts(queues["crawl"], {"queued", "started", "paused", "sealed"}) << '\n';
    std::cout << "snapshots: " << counts(queues["snapshot"], {"queued", "started", "sealed"}) << '\n';
    std::string workers;
    for (const auto& [type, n] : running.items()) {
        workers += fmt::format("{}{} {}", workers.empty() ? "" : ", ", n.get<long>(), type);
    }
    std::cout << "running:   " << (workers.empty() ? "nothing" : workers) << '\n';
    print_active_crawls(active);
    print_failures(failures);
    if (events.empty()) {
        std::cout << "recent events (24h): none\n";
        return result;
    }
    std::cout << "recent events (24h), newest first (orchestrator events for more):\n";
    print_event_table(std::cout, events, true);
    return result;
}

} // namespace orch
