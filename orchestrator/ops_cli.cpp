#include "orchestrator/ops_commands.hpp"

#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "orchestrator/listing_output.hpp"
#include "orchestrator/ops_session.hpp"
#include "orchestrator/text_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <iostream>

namespace orch {
namespace {

// `cancel`, `pause` and `resume` take several crawl ids (such as those `crawls
// --json` lists): a malformed one refuses them all before anything is done;
// the others are acted on in turn, each in its own transaction, and unknown
// ones are named at the end (NotFound, exit 6) after the rest were done.
void for_each_crawl(const CommonOptions& options, const std::vector<std::string>& ids,
                    const std::function<void(pqxx::connection&, const std::string&)>& action)
{
    std::vector<std::string> checked;
    for (const auto& id : ids) {
        checked.push_back(require_uuid(id, "crawl id"));
    }
    OpsSession session(options, OpsSession::Schema::migrated);
    std::vector<std::string> unknown;
    for (const auto& id : checked) {
        try {
            action(session.conn(), id);
        } catch (const NotFound& e) {
            if (ids.size() == 1) {
                throw;
            }
            std::cerr << "orchestrator: " << e.what() << '\n';
            unknown.push_back(id);
        }
    }
    if (!unknown.empty()) {
        throw NotFound(fmt::format("{} of {} crawls not found: {}", unknown.size(), ids.size(),
                                   fmt::join(unknown, ", ")));
    }
}

} // namespace

OpsCommands::OpsCommands(CLI::App& app, const CommonOptions& common) : m_common(common)
{
    m_status = app.add_subcommand("status", "is an orchestrator running here; queues, workers, recent failures "
                                            "(exit 0 running, 1 stale row, 3 not running, 4 database unreachable)");
    m_status->add_flag("--json", m_status_options.json, "one JSON object");

    m_ps = app.add_subcommand("ps", "the process tree from the process table (JSON lines when not on a terminal)");
    add_listing_format_flags(*m_ps, m_ps_options.json, m_ps_options.text);
    m_ps->add_flag("--all,-a", m_ps_options.all, "include exited processes");
    m_ps->add_option("--since", m_ps_options.since,
                     "rows alive at some moment in this window (30m, 2h, 1d), exited or not, in their trees: "
                     "--all for a long history");
    m_ps->add_option("--state", m_ps_options.states, "only rows in this state (repeatable): queued, running, exited")
        ->check(CLI::IsMember({"queued", "running", "exited"}));
    m_ps->add_option("--crawl-id", m_ps_options.crawl_id, "only the trees working on this crawl");

    m_logs = app.add_subcommand("logs", "print a process's stdout (or stderr) log");
    m_logs->add_option("process_id", m_logs_options.process_id, "process row id")->required();
    m_logs->add_flag("--stderr", m_logs_options.stderr_log, "the stderr log instead of stdout");
    m_logs->add_option("-n,--lines", m_logs_options.lines, "only the last N lines")->check(CLI::NonNegativeNumber);
    m_logs->add_flag("-f,--follow", m_logs_options.follow, "keep printing until the process has exited");

    m_show = app.add_subcommand("show", "a crawl or a snapshot with its per-hook results");
    m_show->add_option("kind", m_show_options.kind, "crawl | snapshot")
        ->required()
        ->check(CLI::IsMember({"crawl", "snapshot"}));
    m_show->add_option("id", m_show_options.id, "crawl or snapshot id")->required();
    m_show->add_flag("--json", m_show_options.json, "one JSON object");

    m_crawls = app.add_subcommand("crawls", "the newest crawls first, with their snapshot counts (JSON lines when "
                                            "not on a terminal)");
    add_listing_format_flags(*m_crawls, m_crawls_options.json, m_crawls_options.text);
    m_crawls->add_option("--status", m_crawls_options.statuses, "only crawls in this state (repeatable)")
        ->check(CLI::IsMember({"queued", "started", "paused", "sealed"}));
    m_crawls->add_option("--outcome", m_crawls_options.outcomes, "only sealed crawls that ended so (repeatable)")
        ->check(CLI::IsMember({"succeeded", "partial", "failed", "cancelled", "timed_out"}));
    m_crawls->add_option("--label", m_crawls_options.label, "only crawls with this label");
    m_crawls->add_option("--tag", m_crawls_options.tags, "only crawls with this tag (repeatable: all of them)");
    m_crawls->add_option("--since", m_crawls_options.since, "only crawls added in this window (30m, 2h, 1d)");
    m_crawls->add_option("-n,--limit", m_crawls_options.limit, "the newest N (default 20)")
        ->check(CLI::Range(1L, 100000L));

    m_snapshots = app.add_subcommand("snapshots", "a crawl's snapshots in creation order, with their directories "
                                                  "(JSON lines when not on a terminal)");
    m_snapshots->add_option("crawl_id", m_snapshots_options.crawl_id, "crawl id")->required();
    add_listing_format_flags(*m_snapshots, m_snapshots_options.json, m_snapshots_options.text);
    m_snapshots->add_option("--status", m_snapshots_options.states,
                            "only snapshots in this state or with this outcome (repeatable)")
        ->check(CLI::IsMember({"queued", "started", "sealed", "succeeded", "partial", "failed", "cancelled",
                               "timed_out"}));
    m_snapshots->add_option("--host", m_snapshots_options.host, "only snapshots of this host");
    m_snapshots->add_option("-n,--limit", m_snapshots_options.limit, "the first N (default: all)")
        ->check(CLI::Range(1L, 100000000L));

    m_report = app.add_subcommand("report", "a crawl's report: hosts, HTTP status codes, MIME types, failures by "
                                            "plugin and reason");
    m_report->add_option("crawl_id", m_report_options.crawl_id, "crawl id")->required();
    m_report->add_option("--top", m_report_options.top, "rows per section at most (default 20)")
        ->check(CLI::Range(1L, 100000L));
    m_report->add_flag("--json", m_report_options.json, "one JSON object");

    m_cancel = app.add_subcommand("cancel", "cancel a crawl (its crawl worker stops it; a crawl nobody runs is "
                                            "sealed cancelled at once)");
    m_cancel->add_option("crawl_id", m_cancel_ids, "crawl ids")->required();

    m_pause = app.add_subcommand("pause", "pause a crawl: nothing more starts for it until resumed (its running "
                                          "snapshots finish, then its crawl worker releases it)");
    m_pause->add_option("crawl_id", m_pause_ids, "crawl ids")->required();
    m_pause->add_option("--reason", m_pause_reason, "why, for the event journal");

    m_resume = app.add_subcommand("resume", "resume a paused crawl");
    m_resume->add_option("crawl_id", m_resume_ids, "crawl ids")->required();

    m_retry = app.add_subcommand("retry", "queue a snapshot's failed results again, or those of a crawl's "
                                          "unsuccessful snapshots");
    m_retry->add_option("id", m_retry_id, "snapshot id or crawl id")->required();

    m_prune = app.add_subcommand("prune", "delete exited process rows older than a cutoff, and their log files");
    m_prune->add_option("--older-than", m_prune_options.older_than, "age such as 30d, 12h, 90m (default 30d)");
    m_prune->add_flag("--dry-run", m_prune_options.dry_run, "only count what would be deleted");

    m_events = app.add_subcommand("events", "the event journal: operator actions and what the processes decided "
                                            "(JSON lines when not on a terminal)");
    add_listing_format_flags(*m_events, m_events_options.json, m_events_options.text);
    m_events->add_option("--crawl-id", m_events_options.crawl_id, "only this crawl's events");
    m_events->add_option("--since", m_events_options.since, "only the events of this window (30m, 2h, 1d)");
    m_events->add_option("--kind", m_events_options.kinds,
                         "only this kind (repeatable): crawl.cancelled, or a whole noun such as crawl");
    m_events->add_option("-n,--limit", m_events_options.limit, "the newest N (default 50)")
        ->check(CLI::Range(1L, 100000L));

    m_ops = app.add_subcommand("ops", "operations set-up");
    m_ops->require_subcommand(1);
    auto* role = m_ops->add_subcommand("create-reader-role",
                                       "create or update the read-only role for dashboards (SELECT on ops views only)");
    role->add_option("--role-name", m_role_options.role_name, "role name (default ops_reader)");
    role->add_option("--password-file", m_role_options.password_file, "set the role's password from this file");
}

std::optional<int> OpsCommands::run()
{
    if (*m_status) {
        return static_cast<int>(command_status(m_common, m_status_options));
    }
    if (*m_ps) {
        command_ps(m_common, m_ps_options);
    } else if (*m_logs) {
        command_logs(m_common, m_logs_options);
    } else if (*m_show) {
        command_show(m_common, m_show_options);
    } else if (*m_crawls) {
        require_utf8_options(*m_crawls, {"--label", "--tag"});
        command_crawls(m_common, m_crawls_options);
    } else if (*m_snapshots) {
        require_utf8_options(*m_snapshots, {"--host"});
        command_snapshots(m_common, m_snapshots_options);
    } else if (*m_report) {
        command_report(m_common, m_report_options);
    } else if (*m_cancel) {
        for_each_crawl(m_common, m_cancel_ids, cancel_crawl);
    } else if (*m_pause) {
        require_utf8_options(*m_pause, {"--reason"});
        for_each_crawl(m_common, m_pause_ids,
                       [&](pqxx::connection& conn, const std::string& id) { pause_crawl(conn, id, m_pause_reason); });
    } else if (*m_resume) {
        for_each_crawl(m_common, m_resume_ids, resume_crawl);
    } else if (*m_retry) {
        command_retry(m_common, m_retry_id);
    } else if (*m_prune) {
        command_prune(m_common, m_prune_options);
    } else if (*m_events) {
        require_utf8_options(*m_events, {"--kind"});
        command_events(m_common, m_events_options);
    } else if (*m_ops) {
        command_create_reader_role(m_common, m_role_options);
    } else {
        return std::nullopt;
    }
    return 0;
}

} // namespace orch
