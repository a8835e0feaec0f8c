#pragma once

#include <chrono>

namespace orch {

// How long a worker may hold back a write about its hooks so that a statement
// it makes anyway carries it: a hook's running write (queued -> running with
// its pid), its exit, its archive_result start and end. For a snapshot of
// short hooks the seal carries them all (two statements per snapshot).
//
// What the window costs is staleness: a hook shows `queued` (no pid) for up to
// this long after its start, its exit up to this long after it, and a worker
// crash loses up to this long of writes (those hooks rerun; recovery finds
// their processes by cgroup or cookie). What it saves is write amplification
// under load: a snapshot that takes longer than the window pays up to three
// more statements, each of which adds to the load that made it slow. At 50 ms
// a 2-core VM whose process starts are slow (4 ms per exec) spent five
// statements per snapshot instead of two (scripts/bench row 2); 250 ms stays
// below what a person watching a dashboard notices.
inline constexpr std::chrono::milliseconds k_write_behind_window{250};

} // namespace orch
