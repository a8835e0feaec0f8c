#pragma once

#include "tests/chaos/load_run.hpp"
#include "tests/chaos/trial.hpp"

#include <ostream>
#include <vector>

namespace orch::chaos {

// Prints the figures table (trials, faults by kind, invariant violations, time to
// recover median/max), then every violation and note, then the load figures.
// Returns the total number of violations (trials + load runs).
std::size_t print_report(std::ostream& out, const std::vector<TrialResult>& trials,
                         const std::vector<LoadResult>& loads, double wall_s);

} // namespace orch::chaos
