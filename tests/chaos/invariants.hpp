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
    // The most snapshots of one host seen running a hook at the same moment, from
    // the hooks' records (0 when no rule asked for it).
    int most_per_host = 0;
};

// The per-host rules a trial gave its crawl (`orchestrator add --max-per-host
// --host-delay`); 0: no such rule.
struct HostRules {
    int max_per_host = 0;
    double delay_s = 0;
};

// Claim of a snapshot to its first hook's start record, at most (s): a spawn on a
// loaded machine. Part of the host-delay bound (see check_invariants).
inline constexpr double k_spawn_slack_s = 1.0;

// Checks a finished trial (no orchestrator of the trial running any more). Every
// invariant below is judged from what the hooks themselves wrote in the records
// folder and from what the OS shows, the database only naming what was asked for
// and what the recorder wrote, never through a definition the system uses itself:
//  records    the records folder exists (else nothing of the hooks' runs can
//             be judged), and every succeeded archive_result of the chaos plugin
//             has the end record its hook writes just before succeeding;
//  terminal   every crawl and snapshot sealed, every archive_result terminal;
//  overlap    no two runs of one (snapshot, hook) at the same time (flock
//             markers and start/end intervals from the hooks' own records);
//  rerun      no hook started again after a success its worker recorded (the
//             earlier run's worker exited normally, 0 or 10), nor after one the
//             process table has no trace of: neither a row with the earlier
//             run's pid nor a row without a pid under a worker that did not
//             exit normally (a hook's pid reaches its row with its deferred exit
//             write, which a killed worker never makes: then it is a note);
//  leftover   no live process with one of the trial's cookies or naming its
//             root; no zombie under us or a trial process; no populated cgroup
//             under the trial's scope (waits up to 3 s for each to clear);
//  stale_row  no process row still queued/running once everything ended
//             (and in particular none for a dead process);
//  lost       every URL added has its snapshot;
//  politeness (with `rules`) from the hooks' start/end records and the URL in
//             each start record: never more than max_per_host snapshots of one
//             host with a hook running at the same moment (a run killed before
//             its end record counts at its start only); and, for the N snapshots
//             of a host, their first hook starts span at least
//             (N - 1 - max_per_host) * delay_s - k_spawn_slack_s: claims are
//             delay_s apart, a claim's first hook starts within the slack, and
//             a fault can hold back the spawns of at most the max_per_host
//             snapshots of the host leased when it strikes.
// Blocking: queries the trial's database; the OS scan waits up to 3 s.
// Throws pqxx errors when the database cannot be read.
InvariantReport check_invariants(const TrialSandbox& sandbox, const std::vector<std::string>& crawl_ids,
                                 std::size_t urls_per_crawl, const HostRules& rules = {});

} // namespace orch::chaos
