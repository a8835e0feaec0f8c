#pragma once

#include "common/hooks/hook_discovery.hpp"
#include "common/recorder/process_table.hpp"
#include "common/work/work_states.hpp"
#include "snapshot_worker/result_state.hpp"

#include <pqxx/pqxx>

#include <map>
#include <optional>
#include <string>
#include <vector>

// The result side of the snapshot store's seal and claim statements
// (snapshot_store.cpp, snapshot_batch_seal.cpp): archive_result rows made,
// written and counted in the statements that work_states builds. Parameters are
// referenced by the caller's numbers ("$7"); nothing here runs a statement.
namespace orch::seal_sql {

// A data-modifying CTE body creating a snapshot's queued results (see the .cpp).
std::string create_results(const std::string& snapshot, const std::string& from, const std::string& hooks,
                           const std::string& where);
// The JSON array parameter create_results() reads: [{"plugin", "hook"}, ...].
std::string hooks_json(const std::vector<Hook>& hooks);
// The held result writes in the JSON array parameter `param`, as rows `w`.
std::string held_writes(const std::string& param);
// Applies rows `w` to archive_result `a`: a start sets what starting means
// (process, start time, one more attempt, no end), an end the result's
// columns; a write may carry both.
inline constexpr const char* k_write_held =
    "UPDATE archive_result a SET status = w.status, "
    " process_id = CASE WHEN w.started THEN w.process_id ELSE a.process_id END, "
    " start_ts = CASE WHEN w.started THEN now() - make_interval(secs => w.started_ago) ELSE a.start_ts END, "
    " attempts = a.attempts + CASE WHEN w.started THEN 1 ELSE 0 END, "
    " end_ts = CASE WHEN w.ended THEN now() - make_interval(secs => w.ended_ago) END, "
    " error = w.error, "
    " output_str = CASE WHEN w.ended THEN w.output_str ELSE a.output_str END, "
    " output_json = CASE WHEN w.ended THEN w.output_json ELSE a.output_json END, "
    " output_files = CASE WHEN w.ended THEN w.output_files ELSE a.output_files END, "
    " output_size = CASE WHEN w.ended THEN w.output_size ELSE a.output_size END, "
    " modified_at = now()";
// The result side of one snapshot's seal (see the .cpp), its CTEs' names
// ending in `suffix`; the seal itself is work_states::seal_snapshot_ctes, and
// with a claim work_states::seal_and_claim_statement.
work_states::SnapshotSeal result_seal(const std::string& snapshot, const std::string& writes, bool held_none,
                                      const std::string& suffix = "");
// The parameters of a seal statement: the fixed ones, then those of `exits`.
std::vector<std::optional<std::string>> seal_parameters(std::vector<std::optional<std::string>> fixed,
                                                        const std::vector<process_table::HeldExit>& exits);
// A claimed snapshot's results, as a statement returns them (a JSON object
// hook id -> [id, status], or NULL for none).
std::map<std::string, ResultState> results_of(const pqxx::field& field);

} // namespace orch::seal_sql
