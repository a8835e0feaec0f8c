#include "common/config/cli_options.hpp"
#include "common/app/entry_point.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/errors.hpp"
#include "common/base/exit_codes.hpp"
#include "common/db/machine.hpp"
#include "orchestrator/commands.hpp"
#include "orchestrator/metrics_server.hpp"
#include "orchestrator/ops_commands.hpp"
#include "orchestrator/orchestrator_run.hpp"
#include "orchestrator/text_options.hpp"

#include <algorithm>

namespace {

void add_crawl_options(CLI::App& cmd, orch::AddOptions& add)
{
    cmd.add_option("urls", add.urls, "http(s) URLs");
    cmd.add_option("--depth", add.depth, "follow discovered links this deep (0..100)")->check(CLI::Range(0, 100));
    cmd.add_option("--scope", add.scope,
                   "which discovered links to follow: page (the seeds only), prefix (under a seed's directory), "
                   "host (the seeds' hosts and their www. twins; the default), domain (their registrable domains), "
                   "any")
        ->check(CLI::IsMember({"page", "prefix", "host", "domain", "any"}));
    cmd.add_option("--max-urls", add.max_urls, "stop discovering after this many snapshots")->check(CLI::PositiveNumber);
    cmd.add_option("--max-per-host", add.max_per_host,
                   "run at most this many snapshots of one host at once (default: no limit)")
        ->check(CLI::PositiveNumber);
    cmd.add_option("--host-delay", add.host_delay_s,
                   "wait at least this many seconds between two snapshots of one host (default: none)")
        ->check(CLI::Range(0.001, 86400.0));
    cmd.add_option("--timeout", add.timeout_s, "crawl timeout in seconds")->check(CLI::PositiveNumber);
    cmd.add_option("--label", add.label, "a label for the crawl");
    cmd.add_option("--tag", add.tags, "a tag (repeatable)");
    cmd.add_option("--config", add.config_json, "crawl config as a JSON object (checked against the plugins here)");
}

} // namespace

int main(int argc, char** argv)
{
    using namespace orch;
    CLI::App app{"Claims due crawls, runs crawl workers, recovers what crashed processes left behind.\n"
                 "Without a subcommand: run until nothing is due (or until stopped, with --daemon).",
                 "orchestrator"};
    CommonOptions common;
    add_common_options(app, common);
    app.require_subcommand(0, 1);

    RunOptions run;
    int poll_s = 5;
    int idle_s = 2;
    int stop_grace_s = 60;
    app.add_flag("--daemon", run.daemon, "run until SIGTERM/SIGINT instead of until idle");
    app.add_flag("--takeover", run.takeover, "ask the running orchestrator to stop, then take over");
    app.add_option("--max-crawl-workers", run.max_crawl_workers, "crawl workers at once (default 4)")
        ->envname("MAX_CRAWL_WORKERS")
        ->check(CLI::Range(1, 256));
    app.add_option("--max-snapshot-workers", run.max_snapshot_workers, "snapshot workers per crawl (default 8)")
        ->envname("MAX_SNAPSHOT_WORKERS")
        ->check(CLI::Range(1, 256));
    app.add_option("--plugins-dir", run.plugins_dir, "extra plugins directory")->envname("PLUGINS_DIR");
    app.add_option("--poll-interval", poll_s, "safety-net poll in seconds (default 5)")->check(CLI::Range(1, 3600));
    app.add_option("--idle-window", idle_s, "one-shot: exit when nothing is due within this many seconds (default 2)")
        ->check(CLI::Range(0, 3600));
    app.add_option("--stop-grace", stop_grace_s, "seconds crawl workers get to stop on SIGTERM (default 60)")
        ->envname("STOP_GRACE")
        ->check(CLI::Range(1, 3600));

    app.add_option("--metrics-listen", run.metrics_listen, "serve Prometheus metrics on HOST:PORT (e.g. 127.0.0.1:9464)")
        ->envname("METRICS_LISTEN");

    auto* migrate = app.add_subcommand("migrate", "apply database migrations");
    bool migrate_status = false;
    bool migrate_json = false;
    auto* status_flag = migrate->add_flag(
        "--status", migrate_status,
        "list the migrations of the database and of this binary and their state; apply nothing (exit 5 if refused)");
    migrate->add_flag("--json", migrate_json, "with --status: one JSON object per line")->needs(status_flag);

    AddOptions add;
    auto* add_cmd = app.add_subcommand("add", "add one crawl of the given URLs; prints its id");
    add_crawl_options(*add_cmd, add);
    add_cmd->add_option("--urls-file", add.urls_file, "read URLs from a file, one per line ('-' = stdin)");
    add_cmd->add_option("--id", add.id,
                        "the crawl's id, a UUID (default: a new one); adding the same crawl again under it adds "
                        "nothing, so a scripted add is safe to retry");

    ScheduleOptions schedule;
    auto* schedule_cmd = app.add_subcommand("schedule", "crawl schedules");
    schedule_cmd->require_subcommand(1);
    auto* sched_add = schedule_cmd->add_subcommand("add", "add a schedule; prints its id");
    sched_add->add_option("--every", schedule.every, "cron expression, @hourly/@daily/..., or '@every 30m'")
        ->required();
    add_crawl_options(*sched_add, schedule.add);
    sched_add->add_option("--id", schedule.add.id,
                          "the schedule's id, a UUID (default: a new one); adding the same schedule again under it "
                          "adds nothing, so a scripted add is safe to retry");
    auto* sched_list = schedule_cmd->add_subcommand("list", "list schedules");
    sched_list->add_flag("--json", schedule.json, "one JSON object per line");
    auto* sched_disable = schedule_cmd->add_subcommand("disable", "disable a schedule");
    sched_disable->add_option("id", schedule.id, "schedule id")->required();
    auto* sched_enable = schedule_cmd->add_subcommand("enable", "enable a schedule");
    sched_enable->add_option("id", schedule.id, "schedule id")->required();

    std::string db_action;
    auto* db = app.add_subcommand("db", "manage the embedded PostgreSQL cluster under the data directory");
    db->add_option("action", db_action, "start | stop | status | url")
        ->required()
        ->check(CLI::IsMember({"start", "stop", "status", "url"}));

    bool config_json = false;
    auto* config_cmd = app.add_subcommand("config", "configuration");
    config_cmd->require_subcommand(1);
    auto* config_show = config_cmd->add_subcommand(
        "show", "every option, setting and plugin value in effect, and where it came from; exit 3 if one is invalid");
    config_show->add_flag("--json", config_json, "one JSON object per line");

    ExportOptions export_options;
    auto* export_cmd = app.add_subcommand(
        "export", "write a sealed crawl as a WACZ 1.1.1 file (its WARC files, a CDXJ index, its pages); exit 6 for an "
                  "unknown crawl or one without WARC files, 11 for a crawl not sealed yet, 7 for an unwritable FILE");
    export_cmd->add_option("crawl_id", export_options.crawl_id, "crawl id")->required();
    export_cmd->add_option("--wacz", export_options.wacz, "the WACZ file to write (replaced if it exists)")->required();

    OpsCommands ops(app, common);
    // The arguments as given: `config show` tells a value from the command line
    // from one from the environment (guarded_main hides secrets in argv later).
    const std::vector<std::string> args(argv + 1, argv + argc);

    // Only the run itself (one-shot or --daemon) stays; every subcommand is a
    // one-shot command (logs --follow lasts, but is a terminal tool, not a supervisor).
    const auto long_lived = [&] { return app.get_subcommands().empty(); };
    return guarded_main(app, argc, argv, [&]() -> int {
        configure_logging("orchestrator", common);
        if (!*config_show && !*db) {
            // The events a command records name the machine it ran on.
            set_event_machine_id(detect_machine(optional_machine_id(common)).id);
        }
        if (auto rc = ops.run()) {
            return *rc;
        }
        if (*migrate) {
            if (migrate_status) {
                command_migrate_status(common, migrate_json);
            } else {
                command_migrate(common);
            }
            return 0;
        }
        if (*add_cmd) {
            require_utf8_options(*add_cmd, {"--label", "--tag"});
            add.plugins_dir = run.plugins_dir;
            command_add(common, add);
            return 0;
        }
        if (*schedule_cmd) {
            for (auto* sub : {sched_add, sched_list, sched_disable, sched_enable}) {
                if (*sub) {
                    schedule.action = sub->get_name();
                }
            }
            if (*sched_add) {
                require_utf8_options(*sched_add, {"--label", "--tag"});
            }
            schedule.add.plugins_dir = run.plugins_dir;
            command_schedule(common, schedule);
            return 0;
        }
        if (*export_cmd) {
            command_export(common, export_options);
            return 0;
        }
        if (*config_show) {
            command_config_show(app, args,
                                {{"--database-url", common.database_url},
                                 {"--data-dir", common.data_dir},
                                 {"--machine-id", common.machine_id},
                                 {"--log-format", common.log_format},
                                 {"--log-level", common.log_level},
                                 {"--plugins-dir", run.plugins_dir},
                                 {"--max-crawl-workers", std::to_string(run.max_crawl_workers)},
                                 {"--max-snapshot-workers", std::to_string(run.max_snapshot_workers)},
                                 {"--stop-grace", std::to_string(stop_grace_s)},
                                 {"--poll-interval", std::to_string(poll_s)},
                                 {"--idle-window", std::to_string(idle_s)},
                                 {"--metrics-listen", run.metrics_listen}},
                                run.plugins_dir, config_json);
            return 0;
        }
        if (*db) {
            // LSB convention for status: 3 = not running.
            return command_db(common, db_action) ? 0 : 3;
        }
        if (!run.metrics_listen.empty()) {
            // Checked before anything starts. From the environment it is a setting
            // (3: systemd's unit does not restart on it), from the command line bad input (7).
            try {
                parse_metrics_listen(run.metrics_listen);
            } catch (const InvalidInput& e) {
                if (std::find(args.begin(), args.end(), "--metrics-listen") == args.end() &&
                    std::none_of(args.begin(), args.end(),
                                 [](const std::string& a) { return a.rfind("--metrics-listen=", 0) == 0; })) {
                    throw ConfigError(std::string("environment variable METRICS_LISTEN: ") + e.what());
                }
                throw;
            }
        }
        run.poll_interval = std::chrono::seconds(poll_s);
        run.idle_window = std::chrono::seconds(idle_s);
        run.stop_grace = std::chrono::seconds(stop_grace_s);
        return to_int(run_orchestrator(common, run));
    }, long_lived);
}
