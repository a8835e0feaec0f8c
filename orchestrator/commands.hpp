#pragma once

#include "common/cli_options.hpp"

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
    std::optional<int> max_urls;
    std::optional<int> timeout_s;
    std::string label;
    std::vector<std::string> tags;
    std::string config_json;     // crawl config as a JSON object
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

// Stores one crawl and prints its id on stdout.
void command_add(const CommonOptions& options, const AddOptions& add);

// `db start|stop|status|url` for the embedded cluster. Returns false for a
// `status` of a stopped cluster.
bool command_db(const CommonOptions& options, const std::string& action);

} // namespace orch
