#include "tests/bench/teardown_report.hpp"

#include <algorithm>

namespace orch::bench {

namespace {

bool deadline_ahead(const TornDownTree& t)
{
    return t.deadline_ms >= t.teardown_began_ms;
}

std::string count_of(long n, const std::string& what)
{
    return std::to_string(n) + (n == 1 ? " tree " : " trees ") + what;
}

} // namespace

std::vector<double> late_after_deadline_ms(const TeardownRun& run)
{
    std::vector<double> out;
    for (const auto& t : run.trees) {
        if (deadline_ahead(t)) {
            out.push_back(std::max(0.0, t.gone_ms - t.deadline_ms));
        }
    }
    return out;
}

std::vector<std::string> teardown_defects(const TeardownRun& run)
{
    auto count = [&](auto pred) { return std::count_if(run.trees.begin(), run.trees.end(), pred); };
    std::vector<std::string> out;
    if (const auto n = count([](const TornDownTree& t) { return t.survived_kill; }); n > 0) {
        out.push_back(count_of(n, "survived SIGKILL"));
    }
    if (const auto n = count([](const TornDownTree& t) { return !t.populated; }); n > 0) {
        out.push_back(count_of(n, "not fully started"));
    }
    if (const auto n = count([](const TornDownTree& t) { return !deadline_ahead(t); }); n > 0) {
        out.push_back(count_of(n, "past deadline before teardown"));
    }
    if (const long missing = run.launched - static_cast<long>(run.trees.size()); missing != 0) {
        out.push_back(count_of(missing, "launched but not in the outcomes"));
    }
    return out;
}

std::vector<Row> teardown_rows(const TeardownRun& run)
{
    const auto late = late_after_deadline_ms(run);
    const auto defects = teardown_defects(run);
    const auto p99 = quantile(late, 0.99);
    // The largest deadline still ahead when the teardown began: none without a sample.
    double largest_ms = 0;
    for (const auto& t : run.trees) {
        if (deadline_ahead(t)) {
            largest_ms = std::max(largest_ms, t.deadline_ms - t.teardown_began_ms);
        }
    }
    const Figure largest = measured_if(!late.empty(), largest_ms);
    const Figure over = measured_if(!late.empty(), run.total_ms - largest_ms);
    const std::string trees = std::to_string(late.size()) + " of " + std::to_string(run.launched) + " trees";
    Row precision{"5 teardown: deadline->gone p99 (ms)", fixed(p99), "-", "-", "p99 <= 50 ms",
                  judge(p99, defects, [](double v) { return v <= 50; }),
                  "steady clock from each tree's launch: its deadline -> its last process reaped (" + trees + ")"};
    Row total{"5 teardown: total vs largest deadline (ms)", fixed(run.total_ms, 0), fixed(largest, 0),
              over ? (*over >= 0 ? "+" : "") + fixed(*over, 0) + " ms" : "no data", "<= +100 ms",
              judge(over, defects, [](double v) { return v <= 100; }),
              "steady clock: teardown called -> returned, vs the largest deadline still ahead then"};
    return {precision, total};
}

} // namespace orch::bench
