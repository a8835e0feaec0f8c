#pragma once

#include "common/db/pending_statement.hpp"
#include "common/supervision/process_exit.hpp"
#include "common/supervision/process_identity.hpp"

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

// The `process` table as supervision uses it. Each function runs and commits
// its own transaction on the given connection; libpqxx exceptions propagate.
namespace orch::process_table {

struct NewRow {
    std::string id; // chosen by the caller (log file names depend on it)
    std::string machine_id;
    std::optional<std::string> parent_id;
    std::string process_type = "hook";
    std::vector<std::string> cmd;
    std::map<std::string, std::string> env; // recorded as given: redact first
    std::optional<std::string> pwd;
    std::optional<double> timeout_s;
    std::optional<std::string> cookie;
    std::optional<std::string> containment;
    std::optional<std::string> cgroup_path;
    std::optional<std::string> stdout_path;
    std::optional<std::string> stderr_path;
    std::optional<std::string> plugin;
    std::optional<std::string> hook_name;
    std::optional<std::string> crawl_id;
    std::optional<std::string> snapshot_id;
    std::optional<std::string> archive_result_id;
};

// What a row says about a process that may still be running.
struct LiveRow {
    std::string id;
    std::optional<std::string> parent_id;
    std::string process_type;
    std::string status; // queued | running
    std::optional<ProcessIdentity> identity; // set once the pid was recorded
    std::optional<std::string> cookie;
    std::optional<std::string> cgroup_path;
    std::optional<pid_t> pgid;
};

struct EndRecord {
    std::optional<int> exit_code;   // NULL unless we reaped it
    std::optional<int> term_signal;
    std::string end_reason;
    std::optional<std::string> stdout_tail;
    std::optional<std::string> stderr_tail;
    // CPU time from the reaping waitid (ResourceUsage): NULL keeps what the
    // row has.
    std::optional<ResourceUsage> usage{};
};

// A hook's exit (or a worker's: LaunchRequest::hold_exit) that its supervisor
// holds back for a moment (see Supervisor::m_held_exits) to send it together
// with other writes: folded into the next process insert, into an owner's
// statement (a snapshot's or a crawl's seal), or written alone when nothing
// came along in time.
struct HeldExit {
    std::string id;
    // Set when the row's running write never happened (a hook that ended before
    // its deferred running write): the exit write records the identity too.
    std::optional<ProcessIdentity> identity;
    pid_t pgid = 0;
    std::chrono::steady_clock::time_point spawned;
    std::chrono::steady_clock::time_point ended;
    EndRecord end;
    // With the identity: the cgroup leaf it ran in, for a row inserted before
    // its leaf was chosen (Supervisor::reserve). NULL keeps the row's.
    std::optional<std::string> cgroup_path;
};

// `exits` as the JSON array that exits_update() reads. Times become "seconds
// ago" as of this call (the database's clock stays the only one in the rows);
// tails lose U+0000. "[]" when `exits` is empty.
std::string exits_json(const std::vector<HeldExit>& exits);
// `UPDATE process ...` applying the exits in the JSON array parameter `param`
// (for example "$19"), for use as a data-modifying CTE. An exit always ends
// its row (status exited); it overwrites an earlier end reason but keeps a
// recorded exit code, signal, tail and ended_at that it does not carry itself.
std::string exits_update(const std::string& param);

// Up to this many exits are written by their keys (one UPDATE ... WHERE id = $n
// each), more through the JSON form of exits_update().
inline constexpr std::size_t k_max_keyed_exits = 4;
// The data-modifying CTEs writing `count` exits whose parameters
// (exits_parameters) start at `$first`, each followed by ", " ("" for none),
// to place right after a statement's WITH. Keyed up to k_max_keyed_exits:
// a plan that probes the primary key whatever the table's statistics; a join
// against a JSON set, planned while the table was young and cached, hashes a
// sequential scan of the whole table until the next analyse.
std::string exits_ctes(std::size_t count, int first);
// The parameters of exits_ctes(exits.size(), ...), in order.
std::vector<std::optional<std::string>> exits_parameters(const std::vector<HeldExit>& exits);
// How many parameters exits_ctes(count, ...) takes.
std::size_t exits_parameter_count(std::size_t count);

// A statement carrying held exits has one variant per keyed count and one for
// the JSON form. exits_variant(count) is the index of the one `count` exits
// take; exits_variant_name() a suffix for its prepared statement's name.
inline constexpr std::size_t k_exit_variants = k_max_keyed_exits + 2;
constexpr std::size_t exits_variant(std::size_t count)
{
    return count > k_max_keyed_exits ? k_max_keyed_exits + 1 : count;
}
std::string exits_variant_name(std::size_t count);
// `statement` preceded by exits_ctes(count, first) as its WITH list (as it is
// when count is 0).
std::string with_exits(std::size_t count, int first, const std::string& statement);
// `build(count)` for a count of each variant, made once by the caller (a
// function-local static): the statements' text is not rebuilt per execution.
template <typename Build>
std::array<std::string, k_exit_variants> exits_variants(Build build)
{
    std::array<std::string, k_exit_variants> out;
    for (std::size_t count = 0; count < k_exit_variants; ++count) {
        out[count] = build(count);
    }
    return out;
}

// INSERT with status 'queued', with the held `exits` written by the same
// statement (with_exits). The send_ functions send their statement
// and return without waiting for it (see PendingStatement: `conn` is busy until
// the statement is finished).
[[nodiscard]] PendingStatement send_insert_queued(pqxx::connection& conn, const NewRow& row,
                                                  const std::vector<HeldExit>& exits = {});
// INSERTs every row with status 'queued' in one statement (rows reserved for
// launches to come: Supervisor::reserve).
[[nodiscard]] PendingStatement send_insert_queued_rows(pqxx::connection& conn, const std::vector<NewRow>& rows);
// Writes the held exits in `exits` (exits_ctes), in one statement.
[[nodiscard]] PendingStatement send_write_exits(pqxx::connection& conn, const std::vector<HeldExit>& exits);
// Inserts a row for an already running process (a supervisor's own row).
void insert_running(pqxx::connection& conn, const NewRow& row, const ProcessIdentity& identity, pid_t pgid);
// queued -> running with its OS identity.
// `since_spawn`: how long ago the process started (started_at = now() minus that;
// the database's clock stays the only one in the row).
// `cgroup_path`, when set, replaces the row's (a reserved row learns its leaf here).
void mark_running(pqxx::connection& conn, const std::string& id, const ProcessIdentity& identity, pid_t pgid,
                  std::chrono::microseconds since_spawn = std::chrono::microseconds(0),
                  const std::optional<std::string>& cgroup_path = std::nullopt);
// -> exited, ended_at = now(). Overwrites an earlier end record (a teardown
// may refine the reason recorded when the leader exited) but keeps a recorded
// exit code when `end.exit_code` is empty.
void mark_exited(pqxx::connection& conn, const std::string& id, const EndRecord& end);
[[nodiscard]] PendingStatement send_mark_exited(pqxx::connection& conn, const std::string& id, const EndRecord& end);
// Recovery's close of a row it judged stale: -> exited with `end_reason`, a
// NULL exit code and ended_at = now(), but only while the row is still not
// exited and still records `pid` (nullopt: no pid yet). A supervisor that
// recorded the exit (or the spawn) since recovery read the row keeps its
// record. Returns whether the row was closed. Blocks for one round trip;
// throws what libpqxx throws.
bool close_stale(pqxx::connection& conn, const std::string& id, std::optional<pid_t> pid,
                 const std::string& end_reason);
// heartbeat_at = now() for every id, in one statement.
void heartbeat(pqxx::connection& conn, const std::vector<std::string>& ids);
// Rows of this machine with status queued or running.
std::vector<LiveRow> live_rows(pqxx::connection& conn, const std::string& machine_id);
// Status of one row; nullopt if there is no such row.
std::optional<std::string> status_of(pqxx::connection& conn, const std::string& id);

} // namespace orch::process_table
