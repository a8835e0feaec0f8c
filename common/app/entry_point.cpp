#include "common/app/entry_point.hpp"

#include "common/supervision/command_line.hpp"
#include "common/base/errors.hpp"
#include "common/base/exit_codes.hpp"
#include "common/config/lean_exec.hpp"

#include <fmt/format.h>
#include <pqxx/pqxx>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace orch {
namespace {

int report(const CLI::App& app, ExitCode code, const std::string& message)
{
    std::string text = message;
    while (!text.empty() && text.back() == '\n') {
        text.pop_back();
    }
    std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), text.c_str());
    return to_int(code);
}

// The environment variable behind a failed option, when the value came from
// there: an option bound to a variable that is set and not given on the command
// line. Its error is a configuration error (3, as for every malformed setting),
// not a usage error (2): the command line was fine.
const CLI::Option* env_culprit(const CLI::App& app, const std::string& message, int argc, char** argv)
{
    const auto colon = message.find(':');
    if (colon == std::string::npos || message.rfind("--", 0) != 0) {
        return nullptr;
    }
    const std::string flag = message.substr(0, colon);
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == flag || arg.rfind(flag + "=", 0) == 0) {
            return nullptr;
        }
    }
    std::vector<const CLI::App*> apps{&app};
    for (std::size_t i = 0; i < apps.size(); ++i) {
        for (const auto* opt : apps[i]->get_options()) {
            if (opt->check_lname(flag.substr(2)) && !opt->get_envname().empty() &&
                std::getenv(opt->get_envname().c_str()) != nullptr) {
                return opt;
            }
        }
        for (const auto* sub : const_cast<CLI::App*>(apps[i])->get_subcommands([](CLI::App*) { return true; })) {
            apps.push_back(sub);
        }
    }
    return nullptr;
}

} // namespace

int guarded_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body,
                 const std::function<bool()>& long_lived)
{
    // A closed pipe is an error to report, not a reason to die silently.
    std::signal(SIGPIPE, SIG_IGN);
    try {
        // CLI11 leaves argv as it is: a re-exec below still passes it on whole.
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (const auto* opt = env_culprit(app, e.what(), argc, argv); opt != nullptr && e.get_exit_code() != 0) {
            return report(app, ExitCode::config,
                          fmt::format("environment variable {}: {}", opt->get_envname(), e.what()));
        }
        int rc = app.exit(e);
        return rc == 0 ? 0 : to_int(ExitCode::usage);
    }
    // After the parse, so that --help, --version and usage errors cost one start,
    // and a one-shot command is not loaded twice to save memory it holds for a moment.
    reexec_without_gnutls_init(argv, long_lived());
    hide_secret_arguments(argc, argv);
    try {
        return body();
    } catch (const Error& e) {
        return report(app, e.code(), e.what());
    } catch (const pqxx::broken_connection& e) {
        return report(app, ExitCode::database_unavailable, fmt::format("lost the database connection: {}", e.what()));
    } catch (const pqxx::in_doubt_error& e) {
        return report(app, ExitCode::database_unavailable,
                      fmt::format("lost the database connection while committing (the commit may or may not have "
                                  "happened): {}",
                                  e.what()));
    } catch (const pqxx::sql_error& e) {
        return report(app, ExitCode::internal_error, fmt::format("database error: {} (query: {})", e.what(), e.query()));
    } catch (const std::exception& e) {
        return report(app, ExitCode::internal_error, e.what());
    }
}

} // namespace orch
