#include "orchestrator/commands.hpp"

#include "common/database.hpp"
#include "common/embedded_postgres.hpp"
#include "common/errors.hpp"
#include "common/migrate.hpp"

#include <fmt/format.h>

#include <iostream>

namespace orch {

void command_migrate(const CommonOptions& options)
{
    auto data_dir = prepare_data_dir(options);
    auto db = Database::open(options, data_dir);
    auto report = apply_migrations(db.conn());
    if (report.applied.empty()) {
        std::cout << fmt::format("schema is up to date (version {})\n", report.to_version);
    } else {
        std::cout << fmt::format("migrated schema from version {} to {} ({})\n", report.from_version,
                                 report.to_version, fmt::join(report.applied, ", "));
    }
}

bool command_db(const CommonOptions& options, const std::string& action)
{
    if (!options.database_url.empty() && action != "url") {
        throw ConfigError("`orchestrator db` manages the embedded cluster; DATABASE_URL is set, so there is none");
    }
    auto data_dir = prepare_data_dir(options);
    if (action == "start") {
        auto conninfo = EmbeddedCluster::start_explicit(data_dir);
        {
            auto db = Database::connect(conninfo);
            apply_migrations(db.conn());
        }
        std::cout << conninfo << std::endl;
        return true;
    }
    if (action == "stop") {
        bool was_running = EmbeddedCluster::stop(data_dir);
        std::cout << (was_running ? "stopped" : "not running") << std::endl;
        return true;
    }
    if (action == "status") {
        bool up = EmbeddedCluster::running(data_dir);
        std::cout << (up ? "running" : "stopped") << std::endl;
        return up;
    }
    if (!options.database_url.empty()) {
        std::cout << options.database_url << std::endl;
    } else {
        std::cout << EmbeddedCluster::conninfo(data_dir) << std::endl;
    }
    return true;
}

} // namespace orch
