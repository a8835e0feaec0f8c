#pragma once

#include "common/db/database_outage.hpp"

#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace orch {

// Joined into a statement as `FROM <k_async_commit>` (or `, <k_async_commit>`),
// makes the statement's own implicit transaction commit without waiting for the
// WAL flush. The setting is set_config(..., is_local => true): it lasts until
// the end of that transaction, and the commit record is written
// (asynchronously) before it is reset. One round trip instead of four (BEGIN,
// SET LOCAL, statement, COMMIT).
//
// Only for writes whose loss in a *database* crash is repaired by something
// durable written later (a committed row is visible at once and survives a
// crash of ours): see process_table.cpp and snapshot_store.cpp for each case.
inline constexpr const char* k_async_commit =
    "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

// Runs one statement in autocommit (its own implicit transaction: one round
// trip), prepared once per connection: parsing and planning a small statement
// anew costs more than executing it. Re-declaring an identical definition is a
// no-op in libpqxx; the server prepares it at its first use on the connection.
// Blocks for the round trip, and through a database outage (ride_out: a
// statement the server broke off did not commit, and is sent again once it is
// back); throws what libpqxx throws (pqxx::broken_connection past the outage
// grace, pqxx::sql_error). Must not be called while a transaction is open on `conn`.
template <typename... Args>
pqxx::result exec_autocommit(pqxx::connection& conn, const std::string& name, const std::string& definition,
                             const Args&... args)
{
    return ride_out(conn, [&] {
        conn.prepare(name, definition);
        pqxx::nontransaction tx(conn);
        return tx.exec_prepared(name, args...);
    });
}

// Executes the statement prepared as `name` in `tx` with parameters known only
// at run time, their number too (nullopt = SQL NULL). Throws what libpqxx throws.
template <typename Transaction>
pqxx::result exec_prepared_params(Transaction& tx, const std::string& name,
                                  const std::vector<std::optional<std::string>>& params)
{
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) {
        values.push_back(p ? p->c_str() : nullptr);
    }
    return tx.exec_prepared(name, pqxx::prepare::make_dynamic_params(values));
}

// exec_autocommit with parameters known only at run time (exec_prepared_params).
inline pqxx::result exec_autocommit_params(pqxx::connection& conn, const std::string& name,
                                           const std::string& definition,
                                           const std::vector<std::optional<std::string>>& params)
{
    return ride_out(conn, [&] {
        conn.prepare(name, definition);
        pqxx::nontransaction tx(conn);
        return exec_prepared_params(tx, name, params);
    });
}

} // namespace orch
