#pragma once

#include "tests/chaos/load_run.hpp"
#include "tests/chaos/trial.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace orch::chaos {

// How many of the trials of each fault kind run must have had their fault
// injected (a trial whose fault was not injected tests nothing of its kind).
enum class InjectionRule {
    once_per_kind,       // quick runs: every kind at least once
    half_of_each_kind,   // full runs: at least half of each kind's trials, rounded up
};

// What a run comes to: invariant violations, and the kinds whose faults were
// injected less often than the rule asks ("kind injected/trials").
struct ChaosVerdict {
    std::size_t violations = 0;
    std::vector<std::string> short_kinds;
    bool passed() const { return violations == 0 && short_kinds.empty(); }
};

// Judges only the injections: the kinds of `trials` short of `rule`.
std::vector<std::string> kinds_short_of_injections(const std::vector<TrialResult>& trials, InjectionRule rule);

// Prints the figures table (trials and injected/trials by fault kind, invariant
// violations, time to recover median/max), then every trial with a violation, a
// note or a fault not injected, then the load figures and the verdict.
ChaosVerdict print_report(std::ostream& out, const std::vector<TrialResult>& trials,
                          const std::vector<LoadResult>& loads, double wall_s, InjectionRule rule);

} // namespace orch::chaos
