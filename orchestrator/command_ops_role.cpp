#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

namespace orch {
namespace {

constexpr const char* k_statement_timeout = "5s";
constexpr const char* k_idle_in_transaction_timeout = "30s";

bool valid_role_name(const std::string& name)
{
    if (name.empty() || name.size() > 63 || !(std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
        return false;
    }
    for (char c : name) {
        if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
            return false;
        }
    }
    return name.rfind("pg_", 0) != 0;
}

std::string read_password(const std::string& path)
{
    std::ifstream in(path);
    if (!in) {
        throw InvalidInput(fmt::format("cannot read the password file {}", path));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    auto password = buffer.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
        password.pop_back();
    }
    if (password.empty()) {
        throw InvalidInput(fmt::format("the password file {} is empty", path));
    }
    return password;
}

} // namespace

void command_create_reader_role(const CommonOptions& options, const ReaderRoleOptions& role)
{
    if (!valid_role_name(role.role_name)) {
        throw InvalidInput(fmt::format("role name '{}': use lower-case letters, digits and '_' (not pg_*)",
                                       role.role_name));
    }
    std::optional<std::string> password;
    if (!role.password_file.empty()) {
        password = read_password(role.password_file);
    }
    OpsSession session(options, OpsSession::Schema::migrated,
                       {{"role_exists", "SELECT 1 FROM pg_roles WHERE rolname = $1"}});
    auto& conn = session.conn();
    pqxx::work tx(conn);
    auto name = tx.quote_name(role.role_name);
    bool exists = !tx.exec_prepared("role_exists", role.role_name).empty();
    // Roles are cluster-wide; NOINHERIT so that memberships granted later do not widen it silently.
    tx.exec0(fmt::format("{} ROLE {} LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION",
                         exists ? "ALTER" : "CREATE", name));
    if (password) {
        // Utility statements take no bind parameters: quoting by the server's rules is the only way here.
        tx.exec0(fmt::format("ALTER ROLE {} PASSWORD {}", name, tx.quote(*password)));
    }
    tx.exec0(fmt::format("GRANT CONNECT ON DATABASE {} TO {}", tx.quote_name(conn.dbname()), name));
    tx.exec0(fmt::format("GRANT USAGE ON SCHEMA ops TO {}", name));
    tx.exec0(fmt::format("GRANT SELECT ON ALL TABLES IN SCHEMA ops TO {}", name));
    // Views added by later migrations (run by this same user) become readable too.
    tx.exec0(fmt::format("ALTER DEFAULT PRIVILEGES IN SCHEMA ops GRANT SELECT ON TABLES TO {}", name));
    tx.exec0(fmt::format("ALTER ROLE {} SET default_transaction_read_only = on", name));
    tx.exec0(fmt::format("ALTER ROLE {} SET statement_timeout = '{}'", name, k_statement_timeout));
    tx.exec0(fmt::format("ALTER ROLE {} SET idle_in_transaction_session_timeout = '{}'", name,
                         k_idle_in_transaction_timeout));
    Event e{"ops.reader_role", fmt::format("read-only role {} {}", role.role_name, exists ? "updated" : "created")};
    e.detail = {{"role", role.role_name}, {"password_set", password.has_value()}};
    record_event(tx, "cli", e);
    tx.commit();
    std::cout << fmt::format("{} role {}: SELECT on the ops views of database {}, read-only transactions, "
                             "statement_timeout {}\n",
                             exists ? "updated" : "created", role.role_name, conn.dbname(), k_statement_timeout);
}

} // namespace orch
