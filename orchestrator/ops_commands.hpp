#pragma once

#include "common/config/cli_options.hpp"

#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <vector>

// The operational surface: commands that read the `ops` views and act on work
// through the database (status, crawls, ps, logs, show, cancel, pause, resume,
// retry, prune, events, and the read-only role for dashboards). Each throws
// orch::Error for what the user can fix (InvalidInput for a malformed id,
// NotFound for an unknown one, LeaseLost for an item a worker holds);
// guarded_main() maps them to exit codes.
namespace orch {

// LSB status codes, used by `orchestrator status` only.
enum class LsbStatus : int {
    running = 0,        // a live orchestrator on this machine
    dead_row = 1,       // a row says running but its process is gone
    not_running = 3,
    unknown = 4,        // the database is unreachable
};

struct StatusOptions {
    bool json = false;
};
// Prints orchestrators (this machine first), queue counts, running workers, recent failures.
LsbStatus command_status(const CommonOptions& options, const StatusOptions& status);

struct PsOptions {
    bool json = false;   // JSON lines (also when stdout is not a terminal)
    bool text = false;   // the table even when stdout is not a terminal
    bool all = false;    // include exited rows (walks ops.process_tree instead of process_tree_live)
    std::string since;   // "2h": rows alive at some moment in the last 2 hours, with their ancestors
    std::vector<std::string> states; // only rows in these states (queued, running, exited); exited implies all
    std::string crawl_id;
};
void command_ps(const CommonOptions& options, const PsOptions& ps);

struct LogsOptions {
    std::string process_id;
    bool stderr_log = false;
    std::optional<long> lines; // -n: the last N lines
    bool follow = false;       // until the row is exited
};
void command_logs(const CommonOptions& options, const LogsOptions& logs);

struct ShowOptions {
    std::string kind; // crawl | snapshot
    std::string id;
    bool json = false;
};
void command_show(const CommonOptions& options, const ShowOptions& show);

struct CrawlsOptions {
    std::vector<std::string> statuses; // queued, started, paused, sealed
    std::vector<std::string> outcomes; // succeeded, partial, failed, cancelled, timed_out
    std::string label;                 // exactly this label
    std::vector<std::string> tags;     // every one of these tags
    std::string since;                 // "2h": created in the last 2 hours
    long limit = 20;                   // the newest N
    bool json = false;                 // JSON lines (also when stdout is not a terminal)
    bool text = false;                 // the table even when stdout is not a terminal
};
// The newest crawls first, with their snapshot counts. Throws InvalidInput for a
// malformed age.
void command_crawls(const CommonOptions& options, const CrawlsOptions& crawls);

struct SnapshotsOptions {
    std::string crawl_id;
    std::vector<std::string> states; // a status (queued, started, sealed) or an outcome (succeeded, ...)
    std::string host;                // only this host (as url_host gives it; compared in lower case)
    long limit = 0;                  // the first N in creation order (0: all)
    bool json = false;               // JSON lines (also when stdout is not a terminal)
    bool text = false;               // the table even when stdout is not a terminal
};
// A crawl's snapshots in creation order (ops.crawl_snapshots), read through a
// cursor. Throws InvalidInput for a malformed id, NotFound for an unknown crawl.
void command_snapshots(const CommonOptions& options, const SnapshotsOptions& snapshots);

struct ReportOptions {
    std::string crawl_id;
    long top = 20;     // rows per section at most
    bool json = false; // one JSON object
};
// A crawl's report: per host, status codes, MIME types, failures by plugin and
// reason (ops.crawl_report_*). Throws InvalidInput for a malformed id, NotFound
// for an unknown crawl.
void command_report(const CommonOptions& options, const ReportOptions& report);

// The actions on one crawl that `cancel`, `pause` and `resume` take in turn for
// each id given (ops_cli.cpp: ids checked first, one database connection, each
// action its own transaction). `crawl_id` is a checked UUID. Throw NotFound.
//
// Cancels: a crawl worker holding it is asked to stop and seal it; one nobody
// runs is sealed cancelled here. Already sealed: says so.
void cancel_crawl(pqxx::connection& conn, const std::string& crawl_id);
// Pauses an unsealed crawl: not due until resumed; a crawl worker holding it
// lets its running snapshots finish, then releases it (exit 10). `reason` is
// journaled. Already paused or sealed: says so.
void pause_crawl(pqxx::connection& conn, const std::string& crawl_id, const std::string& reason);
// A paused crawl is due again at once (or carries on, if its worker has not
// released it yet). Not paused: says so.
void resume_crawl(pqxx::connection& conn, const std::string& crawl_id);
void command_retry(const CommonOptions& options, const std::string& id);

struct PruneOptions {
    std::string older_than = "30d";
    bool dry_run = false;
};
void command_prune(const CommonOptions& options, const PruneOptions& prune);

struct EventsOptions {
    std::string crawl_id;            // only this crawl's events
    std::string since;               // "2h": only events of the last 2 hours
    std::vector<std::string> kinds;  // "crawl.cancelled", or a whole noun: "crawl"
    long limit = 50;                 // the newest N, printed oldest first
    bool json = false;               // JSON lines (also when stdout is not a terminal)
    bool text = false;               // the table even when stdout is not a terminal
};
// The event journal (ops.events): operator actions and notable decisions.
void command_events(const CommonOptions& options, const EventsOptions& events);

struct ReaderRoleOptions {
    std::string role_name = "ops_reader";
    std::string password_file;
};
void command_create_reader_role(const CommonOptions& options, const ReaderRoleOptions& role);

// Registers the subcommands above on `app`; run() executes the selected one
// (from guarded_main's body) and returns its exit code, or nullopt when none
// of them was selected.
class OpsCommands {
public:
    OpsCommands(CLI::App& app, const CommonOptions& common);
    std::optional<int> run();

private:
    const CommonOptions& m_common;
    CLI::App* m_status = nullptr;
    CLI::App* m_ps = nullptr;
    CLI::App* m_logs = nullptr;
    CLI::App* m_show = nullptr;
    CLI::App* m_crawls = nullptr;
    CLI::App* m_cancel = nullptr;
    CLI::App* m_pause = nullptr;
    CLI::App* m_resume = nullptr;
    CLI::App* m_retry = nullptr;
    CLI::App* m_prune = nullptr;
    CLI::App* m_ops = nullptr;
    CLI::App* m_events = nullptr;
    CLI::App* m_snapshots = nullptr;
    CLI::App* m_report = nullptr;
    StatusOptions m_status_options;
    PsOptions m_ps_options;
    LogsOptions m_logs_options;
    ShowOptions m_show_options;
    CrawlsOptions m_crawls_options;
    std::vector<std::string> m_cancel_ids;
    std::vector<std::string> m_pause_ids;
    std::vector<std::string> m_resume_ids;
    std::string m_pause_reason;
    std::string m_retry_id;
    PruneOptions m_prune_options;
    ReaderRoleOptions m_role_options;
    EventsOptions m_events_options;
    SnapshotsOptions m_snapshots_options;
    ReportOptions m_report_options;
};

} // namespace orch
