#pragma once

#include <pqxx/pqxx>

#include <optional>

// The machine's default per-host rules (DEFAULT_MAX_PER_HOST,
// DEFAULT_HOST_DELAY_MS), for the crawls that set none of their own. A crawl's
// own value wins, either way. The claim statements read the machine's through
// two session settings of the worker's connection (common/work/snapshot_claims.cpp):
// the rules live with the machine whose workers fetch the pages, and crawls added
// anywhere get them.
namespace orch {

struct HostRules {
    int max_per_host = 0; // 0: none
    int delay_ms = 0;     // 0: none
    bool any() const noexcept { return max_per_host > 0 || delay_ms > 0; }
    std::optional<double> delay_s() const
    {
        return delay_ms > 0 ? std::optional<double>(delay_ms / 1000.0) : std::nullopt;
    }
};

// From the environment. Throws ConfigError for a value out of range.
HostRules machine_host_rules();

// Sets orch.default_max_per_host and orch.default_host_delay_ms on `conn` for
// the claim statements (one round trip, only when `rules.any()`). Throws what
// libpqxx throws.
void apply_host_rules(pqxx::connection& conn, const HostRules& rules);

} // namespace orch
