#pragma once

#include "tests/chaos/fault_kind.hpp"
#include "tests/chaos/pg_control.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace orch::chaos {

struct TrialOptions {
    int index = 0;
    FaultKind kind = FaultKind::kill_hook;
    std::uint64_t seed = 0;
    bool quick = false;
    PgControl* pg = nullptr;  // the run's own cluster (PostgreSQL faults)
};

struct TrialResult {
    int index = 0;
    FaultKind kind = FaultKind::kill_hook;
    bool daemon = false;
    int urls = 0;
    bool injected = false;
    std::string detail;                    // what the injector did, exit codes
    std::vector<std::string> violations;
    std::vector<std::string> notes;
    double recover_s = -1;                 // fault -> crawl sealed (-1: never)
    double total_s = 0;
};

// One trial: a scratch database and sandbox, a crawl of 20-50 URLs (quick: 20-30)
// through test hooks, an orchestrator (one-shot or daemon, by the seed) with
// LEASE_TTL=4 and TEARDOWN_GRACE=1, one fault at a random moment, then a fresh
// one-shot orchestrator run to completion and the invariant check.
TrialResult run_trial(const TrialOptions& options);

} // namespace orch::chaos
