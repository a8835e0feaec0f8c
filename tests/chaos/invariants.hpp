#pragma once

#include "tests/chaos/trial_sandbox.hpp"

#include <string>
#include <vector>

namespace orch::chaos {

// What the invariant check found. Each violation is "<invariant>: <detail>".
// `notes` are facts worth printing that break no invariant (e.g. a hook rerun
// after a success its killed worker never recorded: at-least-once, allowed).
struct InvariantReport {
    std::vector<std::string> violations;
    std::vector<std::string> notes;
};

// Checks a finished trial (no orchestrator of the trial running any more):
//  terminal   every crawl and snapshot sealed, every archive_result terminal;
//  overlap    no two runs of one (snapshot, hook) at the same time (flock
//             markers and start/end intervals from the hooks' own records);
//  rerun      no hook started again after a success its worker recorded
//             (the earlier run's worker exited normally, 0 or 10);
//  leftover   no live process with one of the trial's cookies or naming its
//             root; no zombie under us or a trial process; no populated cgroup
//             under the trial's scope (waits up to 3 s for each to clear);
//  stale_row  no process row still queued/running once everything ended
//             (and in particular none for a dead process);
//  lost       every URL added has its snapshot.
InvariantReport check_invariants(const TrialSandbox& sandbox, const std::vector<std::string>& crawl_ids,
                                 std::size_t urls_per_crawl);

} // namespace orch::chaos
