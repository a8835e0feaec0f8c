#pragma once

#include "tests/support/db_query.hpp"

#include <string>
#include <vector>

namespace orch::chaos {

// query(url, sql) and scalar(url, sql): one short-lived connection per call
// (tests/support/db_query.hpp).
using test::query;
using test::Row;
using test::scalar;
// `query`, retried for up to `seconds` while the server is unreachable.
std::vector<Row> query_retry(const std::string& url, const std::string& sql, int seconds);

// Row counts of every table plus an md5 over their sorted contents: equal
// fingerprints mean "nothing in the database changed".
std::string database_fingerprint(const std::string& url);

} // namespace orch::chaos
