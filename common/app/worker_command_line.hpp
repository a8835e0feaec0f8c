#pragma once

#include "common/base/exit_codes.hpp"
#include "common/config/cli_options.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace orch {

// What every worker is given besides its crawl or snapshot and its own options.
struct WorkerArguments {
    std::string process_id;  // row prepared by the parent to adopt; empty = register itself
    std::string plugins_dir; // extra user plugins (PLUGINS_DIR)
};

// The command line of a worker executable, `<kind>_worker`: its CLI::App, with
// what every worker is given registered first, in this order: the common options
// (cli_options.hpp), the required `--<kind>-id` and `--process-id` (the row its
// parent prepared). The worker adds its own options to app(), and
// add_plugins_dir() where --plugins-dir is to stand among them, then calls run().
class WorkerCommandLine {
public:
    // `id` and `arguments` receive the parsed values; they must outlive run().
    WorkerCommandLine(const std::string& kind, const std::string& description, std::string& id,
                      WorkerArguments& arguments);
    WorkerCommandLine(const WorkerCommandLine&) = delete;
    WorkerCommandLine& operator=(const WorkerCommandLine&) = delete;

    CLI::App& app() { return m_app; }
    // --plugins-dir (or PLUGINS_DIR): an extra plugins directory.
    void add_plugins_dir();

    // Parses argv and runs `body` under guarded_main (entry_point.hpp: every
    // outcome becomes an exit code), logging configured for the program first.
    int run(int argc, char** argv, const std::function<ExitCode(const CommonOptions&)>& body);

private:
    std::string m_program;
    CLI::App m_app;
    CommonOptions m_common;
    WorkerArguments& m_arguments;
};

} // namespace orch
