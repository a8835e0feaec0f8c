#pragma once

#include <filesystem>
#include <string>

namespace orch::test {

// Bash snippets for the hooks the crawl tests write (after the fixture's
// preamble, which sets $url, $snap and $crawl).

// Prints a succeeded ArchiveResult record.
std::string succeeded_record(const std::string& output_str);

// Defines `count`: prints how many live snapshot_worker processes name `data_dir`
// (not counting a worker's own fork that has not exec'd its hook yet).
std::string count_snapshot_workers_function(const std::filesystem::path& data_dir);

// A stand-in for a browser: a background Crawl hook that starts 10 children
// (every other one ignoring SIGTERM), writes all 11 pids to `pids` and then
// `ready` in its directory, and on SIGTERM removes `ready` and exits, leaving
// its children behind.
std::string browser_hook();

// Waits (bounded) for the browser's `ready`, then appends "<snapshot> up" to
// `seen` if the ready file exists and all 11 browser pids are alive, else "<snapshot> down".
std::string check_browser_hook(const std::filesystem::path& seen);

// Appends $snap to `started`, then sleeps up to 60 s; on SIGTERM appends
// "$snap <epoch seconds>" to `terms` and exits 1 (its `sleep` child is left to the teardown).
std::string slow_hook(const std::filesystem::path& started, const std::filesystem::path& terms);

// Appends $snap to `started`, waits (up to 30 s) until `go` exists, then prints a
// succeeded record: the test decides when the running snapshots finish.
std::string gated_hook(const std::filesystem::path& started, const std::filesystem::path& go);

} // namespace orch::test
