#pragma once

// Row 5 of scripts/bench from one teardown of many process trees: what each
// tree's figure is, and when the row cannot be judged. Pure computation (no
// processes, no clock); nothing here throws but std::bad_alloc.

#include "tests/bench/bench_report.hpp"

#include <string>
#include <vector>

namespace orch::bench {

// One tree of the teardown, its times counted from its own launch.
struct TornDownTree {
    std::string id;
    double deadline_ms = 0;       // its timeout
    double teardown_began_ms = 0; // when the teardown started
    double gone_ms = 0;           // its last process gone (the Supervisor's outcome)
    bool populated = true;        // all its processes ran before the teardown began
    bool survived_kill = false;   // still had processes after SIGKILL
};

struct TeardownRun {
    int launched = 0; // trees launched; each must come back as a TornDownTree
    std::vector<TornDownTree> trees;
    double total_ms = 0; // teardown start -> it returned
};

// The precision sample: (gone - deadline, at least 0) of each tree whose
// deadline fell after the teardown began.
std::vector<double> late_after_deadline_ms(const TeardownRun& run);

// Why the run does not measure precision, each reason one entry: trees that
// survived SIGKILL, trees not fully started, trees whose deadline passed
// before the teardown began (no sample of theirs), trees missing from the
// outcomes. Empty for a sound run.
std::vector<std::string> teardown_defects(const TeardownRun& run);

// Row 5's two rows: deadline -> gone p99 (goal <= 50 ms), and the total
// against the largest deadline still ahead at the start (goal <= +100 ms).
// Both are void ("NO: ...") on any defect, and on an empty sample.
std::vector<Row> teardown_rows(const TeardownRun& run);

} // namespace orch::bench
