#pragma once

#include "tests/chaos/fault_kind.hpp"
#include "tests/chaos/pg_control.hpp"
#include "tests/chaos/trial_sandbox.hpp"

#include <sys/types.h>

#include <random>
#include <string>

namespace orch::chaos {

// What an injection did. `injected` is false when the target never showed up
// (e.g. the crawl finished before any hook ran); such trials count as "missed".
struct FaultReport {
    bool injected = false;
    std::string detail;
};

// Strikes one fault at the system running in `sandbox`. Targets come from the
// trial's `process` rows (running, pid checked against /proc start ticks before
// any signal); the orchestrator is the test's own child `orchestrator_pid`.
// Blocking: a SIGSTOP is held past the lease before SIGCONT, a PostgreSQL stop
// lasts `pg_down_seconds`, a full disk is relieved after a few seconds, a
// paused crawl is resumed after up to 3 s.
// Hostile-hook kinds inject nothing here (the hooks are the fault).
class FaultInjector {
public:
    FaultInjector(const TrialSandbox& sandbox, PgControl& pg, std::mt19937_64& rng, int lease_ttl_s,
                  int pg_down_seconds);
    FaultReport inject(FaultKind kind, pid_t orchestrator_pid);

private:
    struct Target {
        pid_t pid = 0;
        unsigned long long start_ticks = 0;
        std::string row;
    };
    // A random running row matching `where` (SQL over process), polled up to `seconds`.
    bool pick(const std::string& where, int seconds, Target& out);
    // `orchestrator pause`, a random hold, `orchestrator resume`, through the CLI.
    FaultReport pause_resume();
    bool signal_target(const Target& t, int sig);
    FaultReport kill_row(const std::string& what, const std::string& where);
    FaultReport stop_worker();
    FaultReport fill_disk();

    const TrialSandbox& m_sandbox;
    PgControl& m_pg;
    std::mt19937_64& m_rng;
    int m_lease_ttl_s;
    int m_pg_down_seconds;
};

} // namespace orch::chaos
