#pragma once

#include <string>

namespace orch::test {

// Every write to a table, from the moment it is recorded on: a test that must
// judge each write (did a lease lapse between two of them? did two writes share
// a transaction?) reads them here instead of sampling the table's state, which
// misses what happens between two samples however often it looks.
//
// record_row_history(url, table) adds an AFTER INSERT OR UPDATE trigger on
// `table` (a name of ours, never input) of the database at `url` that appends
// one row per written row to test_row_history:
//   seq   bigserial   order of the writes
//   tbl   text        the table written
//   op    text        'INSERT' or 'UPDATE'
//   old   jsonb       the row before an UPDATE (NULL for an INSERT)
//   new   jsonb       the row as written
//   txid  bigint      the writing transaction (txid_current())
//   at    timestamptz the server's clock at the write (clock_timestamp())
// in the same transaction as the write: it commits or rolls back with it.
// For scratch databases only. Throws what libpqxx throws.
void record_row_history(const std::string& url, const std::string& table);

} // namespace orch::test
