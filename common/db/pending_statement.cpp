#include "common/db/pending_statement.hpp"

#include <libpq-fe.h>

namespace orch {
namespace {

// libpqxx 6.4 keeps its PGconn private (libpqxx 7 does too) and offers no
// asynchronous execution of prepared statements with parameters. Naming a
// private member in an explicit instantiation is allowed ([temp.explicit]), and
// the friend defined in that instantiation is the one place that reads it.
using RawConnectionMember = pqxx::internal::pq::PGconn* (pqxx::connection_base::*)() const;

PGconn* raw_connection_of(const pqxx::connection_base& conn);

template <RawConnectionMember Member>
struct RawConnectionAccess {
    friend PGconn* raw_connection_of(const pqxx::connection_base& conn)
    {
        return (conn.*Member)();
    }
};
template struct RawConnectionAccess<&pqxx::connection_base::raw_connection>;

PGconn* open_raw(pqxx::connection& conn)
{
    PGconn* raw = raw_connection_of(conn);
    if (raw == nullptr || PQstatus(raw) != CONNECTION_OK) {
        throw pqxx::broken_connection("connection to the database is not open");
    }
    return raw;
}

// Frees every result libpq has for the command in progress; returns the first
// error, if any.
std::optional<std::pair<std::string, std::string>> drain(PGconn* raw)
{
    std::optional<std::pair<std::string, std::string>> error;
    while (PGresult* result = PQgetResult(raw)) {
        const auto status = PQresultStatus(result);
        if (!error && status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
            const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
            error.emplace(PQresultErrorMessage(result), state ? state : "");
        }
        PQclear(result);
    }
    return error;
}

} // namespace

PendingStatement::PendingStatement(pqxx::connection& conn, const std::string& name, const std::string& definition,
                                   std::vector<std::optional<std::string>> params)
    : m_conn(&conn), m_name(name)
{
    conn.prepare(name, definition);
    conn.prepare_now(name);
    PGconn* raw = open_raw(conn);
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& param : params) {
        values.push_back(param ? param->c_str() : nullptr);
    }
    if (PQsendQueryPrepared(raw, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr,
                            0) == 0) {
        m_done = true;
        throw pqxx::broken_connection(std::string("cannot send ") + name + ": " + PQerrorMessage(raw));
    }
}

PendingStatement::PendingStatement(PendingStatement&& other) noexcept
    : m_conn(other.m_conn), m_name(std::move(other.m_name)), m_done(other.m_done)
{
    other.m_done = true;
}

PendingStatement::~PendingStatement()
{
    if (!m_done) {
        if (PGconn* raw = raw_connection_of(*m_conn)) {
            drain(raw);
        }
    }
}

void PendingStatement::finish()
{
    if (m_done) {
        return;
    }
    m_done = true;
    PGconn* raw = raw_connection_of(*m_conn);
    if (raw == nullptr) {
        throw pqxx::broken_connection("connection to the database is not open");
    }
    const auto error = drain(raw);
    if (PQstatus(raw) != CONNECTION_OK) {
        throw pqxx::broken_connection(error ? error->first : std::string(PQerrorMessage(raw)));
    }
    if (error) {
        throw pqxx::sql_error(error->first, "EXECUTE " + m_name, error->second.empty() ? nullptr : error->second.c_str());
    }
}

} // namespace orch
