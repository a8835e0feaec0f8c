#pragma once

// What this machine's PostgreSQL does with no code of ours, measured as the
// reference machine's figures were (the machine the absolute goals were set
// on), so that a reader can scale the absolute goals to the machine a run
// happened on (row 1 does the same for process starts). Both block for about `seconds` of wall time with
// 8 client threads; they throw what libpqxx throws.

#include <string>

namespace orch::bench {

// New connections per second machine-wide: 8 threads, each connecting, running
// `SELECT 1` and disconnecting in a loop (pgbench -C -S's work).
double connections_per_second(const std::string& conninfo, double seconds);

// Single-row `UPDATE ... WHERE id = $1 RETURNING` per second, 8 clients in
// autocommit, random ids of a 100k-row table, commits not waiting for the WAL
// flush (as our claims and seals do): pgbench's by-id claim with
// synchronous_commit = off. Creates and drops its own table in `conninfo`'s database.
double by_id_updates_per_second(const std::string& conninfo, double seconds);

} // namespace orch::bench
