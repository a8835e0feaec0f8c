#include "common/config/cli_options.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <fcntl.h>
#include <unistd.h>

namespace orch {

void add_common_options(CLI::App& app, CommonOptions& options)
{
    app.add_option("--database-url", options.database_url,
                   "libpq connection string; default: private cluster under the data directory")
        ->envname("DATABASE_URL");
    app.add_option("--data-dir", options.data_dir, "data directory (default ./data)")->envname("DATA_DIR");
    app.add_option("--machine-id", options.machine_id, "override the machine id derived from the host")
        ->envname("MACHINE_ID");
    app.add_option("--log-format", options.log_format, "text or json")
        ->envname("LOG_FORMAT")
        ->check(CLI::IsMember({"text", "json"}));
    app.add_option("--log-level", options.log_level, "debug, info, warn or error")
        ->envname("LOG_LEVEL")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    app.set_version_flag("--version", version_string(app.get_name()));
    // Subcommands created after this accept the common options too (orchestrator add --data-dir ...).
    app.fallthrough();
}

void configure_logging(const std::string& program, const CommonOptions& options)
{
    log::Level level = log::Level::info;
    if (options.log_level == "debug") {
        level = log::Level::debug;
    } else if (options.log_level == "warn") {
        level = log::Level::warn;
    } else if (options.log_level == "error") {
        level = log::Level::error;
    }
    log::configure(program, options.log_format == "json" ? log::Format::json : log::Format::text, level);
}

std::filesystem::path data_dir_path(const CommonOptions& options)
{
    if (options.data_dir.empty()) {
        throw ConfigError("the data directory must not be empty (--data-dir / DATA_DIR)");
    }
    std::error_code ec;
    auto path = std::filesystem::absolute(options.data_dir, ec);
    if (ec) {
        throw ConfigError(fmt::format("data directory {}: {}", options.data_dir, ec.message()));
    }
    path = path.lexically_normal();
    if (!path.empty() && path.filename().empty()) {
        path = path.parent_path();
    }
    return path;
}

std::filesystem::path prepare_data_dir(const CommonOptions& options)
{
    const auto path = data_dir_path(options);
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
        throw ConfigError(fmt::format("cannot create data directory {}: {}", path.string(), ec.message()));
    }
    if (!std::filesystem::is_directory(path)) {
        throw ConfigError(fmt::format("data directory {} is not a directory", path.string()));
    }
    // access() says yes to root even on a read-only mount; creating a file is the real test.
    auto probe = path / fmt::format(".write-test.{}", ::getpid());
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        throw ConfigError(fmt::format("data directory {} is not writable: {}", path.string(), std::strerror(errno)));
    }
    ::close(fd);
    ::unlink(probe.c_str());
    return path;
}

std::optional<std::string> optional_machine_id(const CommonOptions& options)
{
    if (options.machine_id.empty()) {
        return std::nullopt;
    }
    return options.machine_id;
}

std::string version_string(const std::string& program)
{
    return fmt::format("{} {}", program, PROJECT_VERSION_STRING);
}

} // namespace orch
