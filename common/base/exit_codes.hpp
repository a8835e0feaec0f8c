#pragma once

// The one exit-code table shared by orchestrator, crawl_worker and snapshot_worker.
// Documented in docs/ops.md ("Exit codes"), which tests/house/check_exit_codes.py
// holds to this enum; only main() turns outcomes into these. `orchestrator status`
// and `orchestrator db status` use the LSB status codes instead (LsbStatus).
namespace orch {

enum class ExitCode : int {
    ok = 0,                  // done; for workers: the item is sealed
    internal_error = 1,      // a bug or an unexpected system failure
    usage = 2,               // bad command line
    config = 3,              // bad configuration: data dir not writable, malformed config.json, ...
    database_unavailable = 4,// cannot connect to PostgreSQL (or the embedded cluster cannot start)
    schema_mismatch = 5,     // database schema newer than this binary, or not migrated
    not_found = 6,           // unknown crawl / snapshot / process id
    invalid_input = 7,       // malformed id, URL or file given on the command line
    lease_lost = 8,          // another worker holds (or took) the item's lease
    already_running = 9,     // the single-runner gate is held by another orchestrator
    interrupted = 10,        // a one-shot run or a worker stopped by SIGTERM/SIGINT, or a crawl worker's crawl
                             // is paused; work released and resumable (a daemon stopped by a signal exits ok)
    not_sealed = 11,         // `export` of a crawl that is not sealed yet: its WARC files may still grow
};

constexpr int to_int(ExitCode code) { return static_cast<int>(code); }

} // namespace orch
