#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace orch {

// Options every executable accepts. Precedence: command line, then environment, then default.
struct CommonOptions {
    std::string database_url;      // --database-url / DATABASE_URL; empty = embedded cluster under data_dir
    std::string data_dir = "./data";// --data-dir / DATA_DIR
    std::string machine_id;        // --machine-id / MACHINE_ID; empty = derived from the host
    std::string log_format = "text";// --log-format / LOG_FORMAT: text | json
    std::string log_level = "info"; // --log-level / LOG_LEVEL
};

// Registers the common options (with their environment variables) on `app`.
void add_common_options(CLI::App& app, CommonOptions& options);

// Configures orch::log for this process from the options.
void configure_logging(const std::string& program, const CommonOptions& options);

// The data directory as an absolute, normalised path, without touching the disk.
// Throws ConfigError when it is empty or cannot be made absolute.
std::filesystem::path data_dir_path(const CommonOptions& options);

// The data directory as data_dir_path() gives it, created if missing.
// Throws ConfigError when it cannot be created or is not writable.
std::filesystem::path prepare_data_dir(const CommonOptions& options);

std::optional<std::string> optional_machine_id(const CommonOptions& options);

// Prints the version line used by --version of all three executables.
std::string version_string(const std::string& program);

} // namespace orch
