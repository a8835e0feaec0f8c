#include "orchestrator/age_option.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <charconv>

namespace orch {
namespace {

struct AgeUnit {
    const char* suffix;
    const char* name;  // PostgreSQL interval unit
    long seconds;
};

constexpr AgeUnit k_units[] = {
    {"s", "seconds", 1}, {"m", "minutes", 60}, {"h", "hours", 3600}, {"d", "days", 86400}, {"w", "weeks", 604800}};

// Longer than any history kept, far inside what now() - interval can reach:
// PostgreSQL refuses an interval of 99999999999 days and a timestamp before
// 4714 BC, and reports either as a raw error of the query.
constexpr long k_max_age_days = 36525; // 100 years
constexpr long k_max_age_seconds = k_max_age_days * 86400;

} // namespace

std::string parse_age(const std::string& text, const std::string& option)
{
    long value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    std::string unit(end, text.data() + text.size());
    const bool digits = end != text.data();
    for (const auto& u : k_units) {
        if (!digits || unit != u.suffix) {
            continue;
        }
        // Compared by division: the product may not fit in a long.
        const bool huge = ec == std::errc::result_out_of_range && text.front() != '-';
        if (huge || (ec == std::errc() && value > k_max_age_seconds / u.seconds)) {
            throw InvalidInput(fmt::format("{} '{}': too long; at most 100 years ({}d or {}w)", option, text,
                                           k_max_age_days, k_max_age_seconds / 604800));
        }
        if (ec == std::errc() && value > 0) {
            return fmt::format("{} {}", value, u.name);
        }
    }
    throw InvalidInput(fmt::format("{} '{}': expected a positive number with a unit s, m, h, d or w (e.g. 30d)",
                                   option, text));
}

std::optional<std::string> optional_age(const std::string& text, const std::string& option)
{
    if (text.empty()) {
        return std::nullopt;
    }
    return parse_age(text, option);
}

} // namespace orch
