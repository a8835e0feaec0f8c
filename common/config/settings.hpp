#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The numeric settings read from the environment (docs/configuration.md),
// one entry each, so that every process that spawns others can check all of
// them at start: the workers inherit its environment, and a typo found by a
// snapshot worker only after its crawl was claimed would otherwise be met by
// every snapshot in turn. Each process still reads the ones it uses.
namespace orch {

struct Setting {
    const char* name;       // the environment variable
    std::uint64_t fallback; // when unset or empty
    std::uint64_t min;
    std::uint64_t max;
    const char* unit;       // "s", "bytes", or "" for a count
    const char* read_by;    // the executables that use it
    const char* meaning;
};

namespace setting {
inline constexpr Setting lease_ttl{"LEASE_TTL", 30, 2, 3600, "s", "all three",
                                   "a crawl or snapshot lease lasts this long between renewals"};
inline constexpr Setting teardown_grace{"TEARDOWN_GRACE", 10, 1, 3600, "s", "crawl_worker, snapshot_worker",
                                        "cap on a hook tree's wait between SIGTERM and SIGKILL"};
inline constexpr Setting snapshot_max_attempts{"SNAPSHOT_MAX_ATTEMPTS", 3, 1, 100, "", "crawl_worker",
                                               "attempts before a snapshot whose worker keeps dying is sealed failed"};
inline constexpr Setting hook_parallelism{"HOOK_PARALLELISM", 1, 1, 64, "", "snapshot_worker",
                                          "foreground hooks of one step run in parallel up to this"};
// A process that keeps taking snapshots is recycled after this many, so that
// whatever it accumulates (heap fragmentation, caches) stays bounded; the crawl
// worker starts a fresh one while snapshots are due.
inline constexpr Setting snapshot_worker_max_snapshots{
    "SNAPSHOT_WORKER_MAX_SNAPSHOTS", 1000, 1, 1'000'000, "", "snapshot_worker",
    "snapshots one snapshot worker takes before a fresh one replaces it"};
// A snapshot worker whose snapshots end within the write-behind window claims
// up to this many at once and seals them together (snapshot_worker/
// snapshot_batch.hpp): the statements a snapshot costs the database are mostly
// fixed overhead, paid once per batch. 1 takes them one at a time.
inline constexpr Setting snapshot_worker_batch{"SNAPSHOT_WORKER_BATCH", 4, 1, 16, "", "snapshot_worker",
                                               "snapshots a snapshot worker claims and seals per statement while "
                                               "its snapshots are short"};
inline constexpr Setting hook_log_max_bytes{"HOOK_LOG_MAX_BYTES", 64ull << 20, 64ull << 10, 1ull << 40, "bytes",
                                            "all three", "on-disk bound of each child's stdout/stderr log"};
// Politeness for the crawls that set none of their own (`add --max-per-host`,
// `--host-delay`): the machine whose workers claim the snapshots applies them
// (common/work/host_rules.hpp). 0 is none.
inline constexpr Setting default_max_per_host{"DEFAULT_MAX_PER_HOST", 0, 0, 10'000, "", "crawl_worker, snapshot_worker",
                                              "snapshots of one host at once, for crawls without --max-per-host"};
inline constexpr Setting default_host_delay_ms{"DEFAULT_HOST_DELAY_MS", 0, 0, 3'600'000, "ms",
                                               "crawl_worker, snapshot_worker",
                                               "between two starts on one host, for crawls without --host-delay"};
// A worker that loses its database connection waits this long for it to come
// back (a server restart, a failover), its children running on, before it exits
// 4 and leaves the clean-up to recovery (common/db/database_outage.hpp). 0 exits at once.
inline constexpr Setting db_outage_grace{"DB_OUTAGE_GRACE", 30, 0, 3600, "s", "all three",
                                         "how long a process waits for a lost database connection before exiting 4"};
} // namespace setting

// Every entry above, in the order of docs/configuration.md.
const std::vector<const Setting*>& all_settings();

// The setting's value from the environment, or its fallback when unset or
// empty. Throws ConfigError naming the variable, the range and the value for
// anything but a whole number in [min, max].
std::uint64_t read_setting(const Setting& s);
// The same for the settings whose range fits an int (std::logic_error for another).
int read_int_setting(const Setting& s);

// One setting as the environment has it, for `orchestrator config show`.
struct SettingState {
    const Setting* setting = nullptr;
    std::optional<std::string> raw; // the variable's value; nullopt when unset or empty
    std::optional<std::uint64_t> value; // nullopt when invalid
    std::string error;                  // why it is invalid
};
std::vector<SettingState> settings_state();

// Reads every setting, ORCH_CONTAINMENT included. Throws one ConfigError that
// names each invalid one. Call it at start, before anything is claimed.
void check_settings();

// ORCH_CONTAINMENT as set: "" (unset: probe), "fallback", "freezer" or
// "cgroup2". Throws ConfigError naming the variable for any other value, so a
// typo never silently means "probe". The executables call it at start, before
// they write anything; probe() calls it too.
std::string forced_containment_from_env();

} // namespace orch
