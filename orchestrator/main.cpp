#include "common/cli_options.hpp"
#include "common/entry_point.hpp"
#include "common/exit_codes.hpp"
#include "orchestrator/commands.hpp"

int main(int argc, char** argv)
{
    using namespace orch;
    CLI::App app{"Claims due crawls, runs crawl workers, recovers what crashed processes left behind.", "orchestrator"};
    CommonOptions common;
    add_common_options(app, common);
    app.require_subcommand(0, 1);

    auto* migrate = app.add_subcommand("migrate", "apply database migrations");

    AddOptions add;
    auto* add_cmd = app.add_subcommand("add", "add one crawl of the given URLs; prints its id");
    add_cmd->add_option("urls", add.urls, "http(s) URLs");
    add_cmd->add_option("--urls-file", add.urls_file, "read URLs from a file, one per line ('-' = stdin)");
    add_cmd->add_option("--depth", add.depth, "follow discovered links this deep (0..100)")->check(CLI::Range(0, 100));
    add_cmd->add_option("--max-urls", add.max_urls, "stop discovering after this many snapshots")
        ->check(CLI::PositiveNumber);
    add_cmd->add_option("--timeout", add.timeout_s, "crawl timeout in seconds")->check(CLI::PositiveNumber);
    add_cmd->add_option("--label", add.label, "a label for the crawl");
    add_cmd->add_option("--tag", add.tags, "a tag (repeatable)");
    add_cmd->add_option("--config", add.config_json, "crawl config as a JSON object");

    std::string db_action;
    auto* db = app.add_subcommand("db", "manage the embedded PostgreSQL cluster under the data directory");
    db->add_option("action", db_action, "start | stop | status | url")
        ->required()
        ->check(CLI::IsMember({"start", "stop", "status", "url"}));

    return guarded_main(app, argc, argv, [&]() -> int {
        configure_logging("orchestrator", common);
        if (*migrate) {
            command_migrate(common);
            return 0;
        }
        if (*add_cmd) {
            command_add(common, add);
            return 0;
        }
        if (*db) {
            // LSB convention for status: 3 = not running.
            return command_db(common, db_action) ? 0 : 3;
        }
        std::fprintf(stderr, "orchestrator: the run loop is not built yet; use a subcommand (see --help)\n");
        return to_int(ExitCode::usage);
    });
}
