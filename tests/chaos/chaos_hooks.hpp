#pragma once

#include "tests/chaos/fault_kind.hpp"

#include <filesystem>
#include <string>

namespace orch::chaos {

// Writes the trial's plugin `chaos` under `plugins_dir`: two quick Snapshot hooks
// (10_fetch, 20_extract) plus, for a hostile-hook trial, 15_hostile, which
// misbehaves on URLs whose last path segment is a multiple of 5 (hook_fork: only
// on /5) and behaves elsewhere. config.json sets timeout 3 s.
//
// Every hook appends to `<records_dir>/<snapshot id>.<hook>`:
//   "start <pid> <epoch ns> <url>" when it begins (the URL: for the politeness
//       invariant, which reads each run's host from it),
//   "overlap <pid> <epoch ns>" if another run of the same (snapshot, hook) still
//       holds its lock (an flock the kernel releases only when the whole hook
//       tree, children included, is gone),
//   "end <pid> <epoch ns> ok" just before printing its succeeded record.
// The "noop" variant (load runs) records nothing and only prints its result.
void write_chaos_plugin(const std::filesystem::path& plugins_dir, const std::filesystem::path& records_dir,
                        FaultKind kind, const std::string& marker);
void write_noop_plugin(const std::filesystem::path& plugins_dir);

// How many runs of 15_hostile began on a URL it misbehaves on, from the start
// records in `records_dir` (0 when the folder or the hook's records are missing):
// a hostile-hook fault is injected only when this is above 0.
int hostile_runs(const std::filesystem::path& records_dir, FaultKind kind);

// Hook names as recorded in archive_result.hook_name / the record file names.
extern const char* const k_chaos_plugin;

} // namespace orch::chaos
