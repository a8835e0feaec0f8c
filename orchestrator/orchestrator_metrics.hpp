#pragma once

#include "orchestrator/metrics_server.hpp"

#include <memory>
#include <string>

// The orchestrator's Prometheus metrics. Low cardinality only: labels are process
// type, state and outcome, never crawl ids or pids.
//   orchestrator_build_info{version}                       gauge, 1
//   orchestrator_processes{type,state}                     gauge, live rows of this machine
//   orchestrator_process_spawns_total{type}                counter, rows of this machine that started
//   orchestrator_process_exits_total{type,outcome}         counter, outcome as in ops.process_exits
//   orchestrator_process_duration_seconds{type}            histogram of exited processes' runtimes
//   orchestrator_leases_recovered_total{kind}              counter, crawl|snapshot leases freed by recovery
//   orchestrator_db_errors_total{component}                counter, failed metric queries
// Spawns, exits and durations are read incrementally from the process table at
// scrape time (rows that ended more than 10 s ago and after the last scrape), so
// they cover the whole tree (crawl workers, snapshot workers, hooks) on this machine
// from the moment the server started.
namespace orch {

// Counts leases that recovery freed (run loop). Cheap; works without a server.
void count_leases_recovered(long crawls, long snapshots);

// Starts the server on `listen` with its own database connection to `conninfo`
// for scrape-time queries about `machine_id`. Throws like MetricsServer.
std::unique_ptr<MetricsServer> start_orchestrator_metrics(const std::string& listen, const std::string& conninfo,
                                                          const std::string& machine_id);

} // namespace orch
