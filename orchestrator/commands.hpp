#pragma once

#include "common/config/cli_options.hpp"

#include <optional>
#include <string>
#include <vector>

// The orchestrator's subcommands. Each throws orch::Error for what the user can
// fix; main() maps outcomes to exit codes.
namespace orch {

struct AddOptions {
    std::vector<std::string> urls;
    std::string urls_file;       // "-" = stdin
    int depth = 0;
    std::string scope = "host";  // --scope: page | prefix | host | domain | any
    std::optional<int> max_urls;
    std::optional<int> max_per_host;
    std::optional<double> host_delay_s;
    std::optional<int> timeout_s;
    std::string label;
    std::vector<std::string> tags;
    std::string config_json;     // crawl config as a JSON object
    std::string plugins_dir;     // --plugins-dir: the plugins the config is checked against
    std::string id;              // add --id: the crawl's id (empty: a new one)
};

struct ScheduleOptions {
    std::string action;      // add | list | disable | enable
    std::string every;       // cron expression or alias, for add
    AddOptions add;          // the crawl template, for add
    std::string id;          // for disable / enable
    bool json = false;       // for list
};

// `schedule add|list|disable|enable`.
void command_schedule(const CommonOptions& options, const ScheduleOptions& schedule);

// Applies pending migrations; prints what it did.
void command_migrate(const CommonOptions& options);
// `migrate --status`: prints every migration of the database and of this binary
// and its state (one JSON object per line with `json`), applying nothing. Throws
// SchemaMismatch after printing when apply_migrations would refuse the database.
void command_migrate_status(const CommonOptions& options, bool json);

// Stores one crawl and prints its id on stdout. Throws InvalidInput, before
// connecting, for URLs or a crawl config the workers would refuse.
void command_add(const CommonOptions& options, const AddOptions& add);

// `db start|stop|status|url` for the embedded cluster. Returns false for a
// `status` of a stopped cluster.
bool command_db(const CommonOptions& options, const std::string& action);

// One orchestrator option as `config show` reports it: its long name and the
// value the program will use (parsed, or the default).
struct ShownOption {
    std::string name;  // "--max-crawl-workers"
    std::string value;
};

// `config show`: every option of `app` listed in `options`, every setting from
// the environment (common/config/settings.hpp, containment, plugin roots) and every
// plugin's effective configuration, each with the source of its value (the
// command line is `args`, this process's arguments as given). JSON lines when
// `json`. Reads no database. Prints everything, then throws ConfigError naming
// each invalid value, if any.
void command_config_show(const CLI::App& app, const std::vector<std::string>& args,
                         const std::vector<ShownOption>& options, const std::string& plugins_dir, bool json);

struct ExportOptions {
    std::string crawl_id;
    std::string wacz;  // --wacz FILE
};

// `export CRAWL_ID --wacz FILE`: the crawl as a WACZ 1.1.1 (common/work/crawl_export.hpp),
// written beside FILE and renamed into place; blocks while it reads and copies
// every WARC. Cut or missing WARC files are named on stderr. Throws InvalidInput
// (malformed id, unwritable FILE), NotFound (unknown crawl, no WARC file), Error
// with ExitCode::not_sealed (the crawl is not sealed yet).
void command_export(const CommonOptions& options, const ExportOptions& exp);

} // namespace orch
