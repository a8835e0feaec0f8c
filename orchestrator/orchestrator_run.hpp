#pragma once

#include "common/base/exit_codes.hpp"
#include "common/config/cli_options.hpp"
#include "orchestrator/run_options.hpp"

namespace orch {

// Registers, takes the single-runner gate, recovers what crashed processes left,
// then claims due crawls and runs crawl_worker processes within limits, enqueues
// due schedules, and recovers periodically; stops cleanly on SIGTERM/SIGINT.
// Returns ok, or interrupted for a one-shot run stopped by a signal (a daemon
// stopped by a signal returns ok). Throws Error(already_running) when another
// orchestrator holds the gate.
ExitCode run_orchestrator(const CommonOptions& common, const RunOptions& options);

} // namespace orch
