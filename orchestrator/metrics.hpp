#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format 0.0.4 (HELP and TYPE lines, escaped
// label values, _bucket{le=...} cumulative with +Inf, _sum, _count). Thread-safe:
// the run loop updates while the metrics server thread renders.
namespace orch::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class Type { counter, gauge, histogram };

class Registry {
public:
    // Declares a metric family. Throws std::invalid_argument for an invalid name,
    // a redeclaration with another type, or histogram buckets that are not increasing.
    void describe(const std::string& name, Type type, const std::string& help, std::vector<double> buckets = {});

    // Counter += value (value >= 0). Throws std::logic_error for an undeclared family
    // or one of another type, std::invalid_argument for a bad label name.
    void add(const std::string& name, const Labels& labels, double value = 1.0);
    // Gauge = value.
    void set(const std::string& name, const Labels& labels, double value);
    // Histogram: one observation.
    void observe(const std::string& name, const Labels& labels, double value);

    // Called (outside the registry lock) at the start of every render(), e.g. to
    // refresh gauges from the database at scrape time.
    void add_collector(std::function<void(Registry&)> collect);

    std::string render();

private:
    struct Series {
        double value = 0;                 // counter, gauge
        std::vector<std::uint64_t> counts; // histogram: per bucket, not cumulative
        std::uint64_t count = 0;
        double sum = 0;
    };
    struct Family {
        Type type = Type::counter;
        std::string help;
        std::vector<double> buckets;
        std::map<Labels, Series> series;
    };
    Series& series(const std::string& name, Type type, const Labels& labels);

    std::mutex m_mutex;
    std::map<std::string, Family> m_families;
    std::vector<std::function<void(Registry&)>> m_collectors;
};

// The process-wide registry the orchestrator's run loop reports to.
Registry& global();

// A label value escaped for the exposition format (\\, \", \n).
std::string escape_label_value(std::string_view value);
// A sample value: integers without a fraction, +Inf, -Inf, NaN, else shortest round-trip.
std::string format_value(double value);

} // namespace orch::metrics
