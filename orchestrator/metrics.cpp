#include "orchestrator/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace orch::metrics {
namespace {

bool valid_name(std::string_view name, bool allow_colon)
{
    if (name.empty()) {
        return false;
    }
    for (std::size_t i = 0; i < name.size(); ++i) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return false;
        }
    }
    return true;
}

std::string escape_help(std::string_view help)
{
    std::string out;
    for (char c : help) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string label_text(const Labels& labels, const std::string& extra_name = {}, const std::string& extra_value = {})
{
    if (labels.empty() && extra_name.empty()) {
        return "";
    }
    std::string out = "{";
    for (const auto& [k, v] : labels) {
        out += fmt::format("{}{}=\"{}\"", out.size() > 1 ? "," : "", k, escape_label_value(v));
    }
    if (!extra_name.empty()) {
        out += fmt::format("{}{}=\"{}\"", out.size() > 1 ? "," : "", extra_name, extra_value);
    }
    return out + "}";
}

const char* type_name(Type type)
{
    switch (type) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::histogram: return "histogram";
    }
    return "untyped";
}

} // namespace

std::string escape_label_value(std::string_view value)
{
    std::string out;
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string format_value(double value)
{
    if (std::isnan(value)) {
        return "NaN";
    }
    if (std::isinf(value)) {
        return value > 0 ? "+Inf" : "-Inf";
    }
    if (value == std::floor(value) && std::fabs(value) < 1e15) {
        return fmt::format("{}", static_cast<long long>(value));
    }
    return fmt::format("{}", value);
}

void Registry::describe(const std::string& name, Type type, const std::string& help, std::vector<double> buckets)
{
    if (!valid_name(name, true)) {
        throw std::invalid_argument("invalid metric name: " + name);
    }
    if (type == Type::histogram) {
        if (buckets.empty() || !std::is_sorted(buckets.begin(), buckets.end()) ||
            std::adjacent_find(buckets.begin(), buckets.end()) != buckets.end()) {
            throw std::invalid_argument("histogram buckets must be strictly increasing: " + name);
        }
        if (std::isinf(buckets.back())) {
            buckets.pop_back(); // +Inf is always rendered
        }
    }
    std::lock_guard lock(m_mutex);
    auto [it, inserted] = m_families.try_emplace(name);
    if (!inserted && it->second.type != type) {
        throw std::invalid_argument("metric redeclared with another type: " + name);
    }
    it->second.type = type;
    it->second.help = help;
    if (inserted) {
        it->second.buckets = std::move(buckets);
    }
}

Registry::Series& Registry::series(const std::string& name, Type type, const Labels& labels)
{
    auto it = m_families.find(name);
    if (it == m_families.end() || it->second.type != type) {
        throw std::logic_error(fmt::format("metric {} is not a declared {}", name, type_name(type)));
    }
    for (const auto& [k, v] : labels) {
        if (!valid_name(k, false) || k.rfind("__", 0) == 0 || (type == Type::histogram && k == "le")) {
            throw std::invalid_argument(fmt::format("invalid label name {} on {}", k, name));
        }
    }
    auto& s = it->second.series[labels];
    if (type == Type::histogram && s.counts.empty()) {
        s.counts.assign(it->second.buckets.size(), 0);
    }
    return s;
}

void Registry::add(const std::string& name, const Labels& labels, double value)
{
    if (!(value >= 0)) {
        throw std::invalid_argument("a counter only goes up: " + name);
    }
    std::lock_guard lock(m_mutex);
    series(name, Type::counter, labels).value += value;
}

void Registry::set(const std::string& name, const Labels& labels, double value)
{
    std::lock_guard lock(m_mutex);
    series(name, Type::gauge, labels).value = value;
}

void Registry::observe(const std::string& name, const Labels& labels, double value)
{
    std::lock_guard lock(m_mutex);
    auto& s = series(name, Type::histogram, labels);
    const auto& buckets = m_families[name].buckets;
    auto bucket = std::lower_bound(buckets.begin(), buckets.end(), value) - buckets.begin(); // le: value <= bound
    if (!std::isnan(value) && static_cast<std::size_t>(bucket) < s.counts.size()) {
        ++s.counts[static_cast<std::size_t>(bucket)];
    }
    ++s.count;
    s.sum += value;
}

void Registry::add_collector(std::function<void(Registry&)> collect)
{
    std::lock_guard lock(m_mutex);
    m_collectors.push_back(std::move(collect));
}

std::string Registry::render()
{
    std::vector<std::function<void(Registry&)>> collectors;
    {
        std::lock_guard lock(m_mutex);
        collectors = m_collectors;
    }
    for (const auto& collect : collectors) {
        collect(*this);
    }
    std::lock_guard lock(m_mutex);
    std::string out;
    for (const auto& [name, family] : m_families) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(family.help), name, type_name(family.type));
        for (const auto& [labels, s] : family.series) {
            if (family.type != Type::histogram) {
                out += fmt::format("{}{} {}\n", name, label_text(labels), format_value(s.value));
                continue;
            }
            std::uint64_t cumulative = 0;
            for (std::size_t i = 0; i < family.buckets.size(); ++i) {
                cumulative += s.counts[i];
                out += fmt::format("{}_bucket{} {}\n", name, label_text(labels, "le", format_value(family.buckets[i])),
                                   cumulative);
            }
            out += fmt::format("{}_bucket{} {}\n", name, label_text(labels, "le", "+Inf"), s.count);
            out += fmt::format("{}_sum{} {}\n", name, label_text(labels), format_value(s.sum));
            out += fmt::format("{}_count{} {}\n", name, label_text(labels), s.count);
        }
    }
    return out;
}

Registry& global()
{
    static Registry registry;
    return registry;
}

} // namespace orch::metrics
