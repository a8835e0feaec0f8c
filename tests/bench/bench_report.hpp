#pragma once

// How benchmark programs report: one tab-separated line per table row,
//   ROW <row> <our figure> <baseline> <ratio> <goal> <met?>
// which scripts/bench collects into one table. Everything else they print is
// commentary (kept in the log, not in the table).

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace orch::bench {

inline void report_row(const std::string& row, const std::string& ours, const std::string& baseline,
                       const std::string& ratio, const std::string& goal, bool met)
{
    std::printf("ROW\t%s\t%s\t%s\t%s\t%s\t%s\n", row.c_str(), ours.c_str(), baseline.c_str(), ratio.c_str(),
                goal.c_str(), met ? "yes" : "NO");
    std::fflush(stdout);
}

// A row for context, with no goal of its own ("-" in the goal and met columns).
inline void report_context(const std::string& row, const std::string& ours, const std::string& baseline,
                           const std::string& ratio)
{
    std::printf("ROW\t%s\t%s\t%s\t%s\t-\t-\n", row.c_str(), ours.c_str(), baseline.c_str(), ratio.c_str());
    std::fflush(stdout);
}

inline std::string fixed(double v, int decimals = 1)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

// The q-quantile (0..1) of `values` (nearest rank); 0 when empty.
inline double quantile(std::vector<double> values, double q)
{
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    auto rank = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(rank, values.size() - 1)];
}

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> values)
{
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

} // namespace orch::bench
