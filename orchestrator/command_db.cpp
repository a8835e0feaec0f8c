#include "orchestrator/commands.hpp"

#include "common/db/database.hpp"
#include "common/db/embedded_postgres.hpp"
#include "common/base/errors.hpp"
#include "common/db/migrate.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

void command_migrate_status(const CommonOptions& options, bool json)
{
    auto data_dir = prepare_data_dir(options);
    auto db = Database::open(options, data_dir);
    const auto states = migration_status(db.conn());
    int pending = 0;
    std::vector<std::string> refused_names;
    TextTable table({"VERSION", "NAME", "STATE", "APPLIED", "SHA256"});
    for (const auto& m : states) {
        pending += m.kind == MigrationState::Kind::pending;
        if (refused(m.kind)) {
            refused_names.push_back(m.name);
        }
        if (json) {
            auto or_null = [](const std::string& v) { return v.empty() ? nlohmann::json() : nlohmann::json(v); };
            nlohmann::json j{{"version", m.version},
                             {"name", m.name},
                             {"state", kind_name(m.kind)},
                             {"refused", refused(m.kind)},
                             {"applied_at", or_null(m.applied_at)},
                             {"applied_as", or_null(m.applied_as)},
                             {"recorded_sha256", or_null(m.recorded_sha256)},
                             {"sha256", or_null(m.sha256)}};
            std::cout << j.dump() << '\n';
            continue;
        }
        auto state = std::string(kind_name(m.kind));
        if (!m.applied_as.empty()) {
            state += " (applied as " + m.applied_as + ")";
        }
        if (m.kind == MigrationState::Kind::changed) {
            state += " (applied " + m.recorded_sha256.substr(0, 12) + ")";
        }
        table.add_row({std::to_string(m.version), m.name, state,
                       m.applied_at.empty() ? "-" : short_timestamp(m.applied_at),
                       m.sha256.empty() ? "-" : m.sha256.substr(0, 12)});
    }
    if (!json) {
        table.print(std::cout);
        std::cout << fmt::format("\n{} applied, {} pending{}\n", states.size() - static_cast<std::size_t>(pending),
                                 pending, pending > 0 && refused_names.empty() ? ": run `orchestrator migrate`" : "");
    }
    if (!refused_names.empty()) {
        throw SchemaMismatch(fmt::format("the database's applied migrations differ from this binary's ({}): "
                                         "`orchestrator migrate` refuses it",
                                         fmt::join(refused_names, ", ")));
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
