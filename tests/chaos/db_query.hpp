#pragma once

#include <string>
#include <vector>

namespace orch::chaos {

using Row = std::vector<std::string>;

// One short-lived connection per call, so a PostgreSQL restart between calls is
// harmless. Every column comes back as text ("" for NULL). Throws pqxx errors.
std::vector<Row> query(const std::string& url, const std::string& sql);
// First column of the first row ("" when NULL or no row).
std::string scalar(const std::string& url, const std::string& sql);
// `query`, retried for up to `seconds` while the server is unreachable.
std::vector<Row> query_retry(const std::string& url, const std::string& sql, int seconds);

// Row counts of every table plus an md5 over their sorted contents: equal
// fingerprints mean "nothing in the database changed".
std::string database_fingerprint(const std::string& url);

} // namespace orch::chaos
