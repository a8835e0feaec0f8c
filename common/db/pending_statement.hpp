#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

namespace orch {

// One prepared statement sent on a libpqxx connection without waiting for its
// result, so that local work (a spawn, a cgroup removal) overlaps the round trip
// instead of following it. The statement runs in autocommit (its own implicit
// transaction), like exec_autocommit. libpqxx 6.4 has no asynchronous
// parameterised execution, so the send and the result go through libpq
// underneath the libpqxx connection; the statement itself is prepared through
// libpqxx (conn.prepare + prepare_now), which re-prepares it after a reconnect.
//
// Contract: from construction until finish() or destruction, nothing else may
// use `conn` (libpq allows one command in progress per connection).
class PendingStatement {
public:
    // Prepares `name` on the session if it is not yet (a round trip, once per
    // session), then sends it with `params` (nullopt = SQL NULL). Does not wait
    // for the server. Throws pqxx::broken_connection if the connection is gone
    // or the send fails, pqxx::sql_error if preparing fails.
    PendingStatement(pqxx::connection& conn, const std::string& name, const std::string& definition,
                     std::vector<std::optional<std::string>> params);
    // Drains the result if finish() was not called, ignoring its outcome (never throws).
    ~PendingStatement();
    PendingStatement(PendingStatement&& other) noexcept;
    PendingStatement& operator=(PendingStatement&&) = delete;
    PendingStatement(const PendingStatement&) = delete;
    PendingStatement& operator=(const PendingStatement&) = delete;

    // Blocks until the statement's result. Throws pqxx::sql_error when the
    // statement failed, pqxx::broken_connection when the connection broke.
    // Idempotent: a second call returns at once.
    void finish();

private:
    pqxx::connection* m_conn;
    std::string m_name;
    bool m_done = false;
};

// Parameter text as libpqxx would send it: a null const char* is SQL NULL.
inline std::optional<std::string> statement_param(const char* value)
{
    return value ? std::optional<std::string>(value) : std::nullopt;
}
inline std::optional<std::string> statement_param(const std::string& value)
{
    return value;
}
template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
std::optional<std::string> statement_param(T value)
{
    return pqxx::to_string(value);
}

// PendingStatement with exec_autocommit's calling convention.
template <typename... Args>
PendingStatement send_autocommit(pqxx::connection& conn, const std::string& name, const std::string& definition,
                                 const Args&... args)
{
    return PendingStatement(conn, name, definition, {statement_param(args)...});
}

} // namespace orch
