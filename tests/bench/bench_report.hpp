#pragma once

// How benchmark programs report: one tab-separated line per table row,
//   ROW <row> <our figure> <baseline> <ratio> <goal> <met?> <window>
// which scripts/bench collects into one table. Everything else they print is
// commentary (kept in the log, not in the table).
//  <met?>    "yes"; "NO" (the goal missed); "-" (a context row, no goal); or
//            "NO: <why>" when the row cannot be judged: it measured nothing (an
//            empty sample) or its measurement is void (a tree that survived
//            SIGKILL, a tree not fully started). scripts/bench exits non-zero
//            on a "NO: " row: it is a broken benchmark, not a slow machine.
//  <window>  what both sides were timed over, and how ("wall clock, add ->
//            last process gone, 3 interleaved pairs"): a ratio only counts
//            when both sides share it.
// Header-only, no system calls; value_of throws std::logic_error on no data.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace orch::bench {

// A figure computed from a sample: empty ("no data") when the sample had no
// values. Never 0 for nothing: a "p99 <= 50 ms" goal must not pass on it.
using Figure = std::optional<double>;

// `v` when it was measured, else no data.
inline Figure measured_if(bool measured, double v)
{
    Figure out;
    if (measured) {
        out.emplace(v);
    }
    return out;
}

inline std::string fixed(double v, int decimals = 1)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

// "no data" for an empty figure.
inline std::string fixed(const Figure& v, int decimals = 1)
{
    return v ? fixed(*v, decimals) : "no data";
}

// The q-quantile (0..1) of `values` (nearest rank); empty when `values` is.
inline Figure quantile(std::vector<double> values, double q)
{
    if (values.empty()) {
        return std::nullopt;
    }
    std::sort(values.begin(), values.end());
    auto rank = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(rank, values.size() - 1)];
}

// The median of `values` (the mean of the middle two for an even count); empty when `values` is.
inline Figure median(std::vector<double> values)
{
    if (values.empty()) {
        return std::nullopt;
    }
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// A figure of a sample that must not be empty (rounds a benchmark always runs):
// throws std::logic_error when it is.
inline double value_of(const Figure& figure, const char* what)
{
    if (!figure) {
        throw std::logic_error(std::string("no data for ") + what);
    }
    return *figure;
}

// Whether a row met its goal.
struct Verdict {
    enum Kind { met, missed, void_measurement } kind = void_measurement;
    std::string why; // for void_measurement: what the row lacked

    static Verdict of(bool goal_met) { return {goal_met ? met : missed, {}}; }
    static Verdict void_because(std::string why) { return {void_measurement, std::move(why)}; }
    // "yes", "NO" or "NO: <why>".
    std::string text() const { return kind == met ? "yes" : kind == missed ? "NO" : "NO: " + why; }
};

// The verdict of `goal` on `figure`: void when the figure is empty ("no data")
// or the measurement has defects (each a reason it does not count, joined
// into the why); otherwise met or missed.
inline Verdict judge(const Figure& figure, const std::vector<std::string>& defects,
                     const std::function<bool(double)>& goal)
{
    if (!defects.empty()) {
        std::string why;
        for (const auto& d : defects) {
            why += (why.empty() ? "" : "; ") + d;
        }
        return Verdict::void_because(why);
    }
    if (!figure) {
        return Verdict::void_because("no data");
    }
    return Verdict::of(goal(*figure));
}

// One table row; no verdict makes it a context row ("-" in goal and met).
struct Row {
    std::string name, ours, baseline, ratio, goal;
    std::optional<Verdict> verdict;
    std::string window;
};

// The ROW line of `row`, with its newline.
inline std::string format_row(const Row& row)
{
    const std::string goal = row.verdict ? row.goal : "-";
    const std::string met = row.verdict ? row.verdict->text() : "-";
    return "ROW\t" + row.name + "\t" + row.ours + "\t" + row.baseline + "\t" + row.ratio + "\t" + goal + "\t" + met +
           "\t" + (row.window.empty() ? "-" : row.window) + "\n";
}

inline void report(const Row& row)
{
    std::fputs(format_row(row).c_str(), stdout);
    std::fflush(stdout);
}

inline void report_row(const std::string& row, const std::string& ours, const std::string& baseline,
                       const std::string& ratio, const std::string& goal, const Verdict& verdict,
                       const std::string& window)
{
    report({row, ours, baseline, ratio, goal, verdict, window});
}

// A row for context, with no goal of its own.
inline void report_context(const std::string& row, const std::string& ours, const std::string& baseline,
                           const std::string& ratio, const std::string& window)
{
    report({row, ours, baseline, ratio, "-", std::nullopt, window});
}

} // namespace orch::bench
