#pragma once

#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <vector>

namespace orch::test {

// A test's reads and writes of the database, every column as text. The one set
// the fixtures, the security tests and the chaos driver share.
using Row = std::vector<std::string>;

// Runs `sql` on `conn` outside any transaction (autocommit), with `params` as
// $1, $2, ... text parameters; without parameters `sql` may hold several
// statements. Every row, each column as text ("" for NULL). Throws pqxx errors.
std::vector<Row> query(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params = {});
// First column of the first row; nullopt when it is NULL or there is no row.
std::optional<std::string> value(pqxx::connection& conn, const std::string& sql,
                                 const std::vector<std::string>& params = {});
// First column of the first row ("" when NULL or no row).
std::string scalar(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params = {});
// Runs `sql` for its effect.
void execute(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params = {});

// The same over one short-lived connection to `url` per call, so that a
// PostgreSQL restart between calls is harmless.
std::vector<Row> query(const std::string& url, const std::string& sql);
std::string scalar(const std::string& url, const std::string& sql);

} // namespace orch::test
