#include "common/entry_point.hpp"

#include "common/command_line.hpp"
#include "common/errors.hpp"
#include "common/exit_codes.hpp"
#include "common/lean_exec.hpp"

#include <fmt/format.h>
#include <pqxx/pqxx>

#include <csignal>
#include <cstdio>

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

} // namespace

int guarded_main(CLI::App& app, int argc, char** argv, const std::function<int()>& body)
{
    reexec_without_gnutls_init(argv);
    // A closed pipe is an error to report, not a reason to die silently.
    std::signal(SIGPIPE, SIG_IGN);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : to_int(ExitCode::usage);
    }
    hide_secret_arguments(argc, argv);
    try {
        return body();
    } catch (const Error& e) {
        return report(app, e.code(), e.what());
    } catch (const pqxx::broken_connection& e) {
        return report(app, ExitCode::database_unavailable, fmt::format("lost the database connection: {}", e.what()));
    } catch (const pqxx::sql_error& e) {
        return report(app, ExitCode::internal_error, fmt::format("database error: {} (query: {})", e.what(), e.query()));
    } catch (const std::exception& e) {
        return report(app, ExitCode::internal_error, e.what());
    }
}

} // namespace orch
