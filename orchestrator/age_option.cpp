#include "orchestrator/age_option.hpp"

#include "common/errors.hpp"

#include <fmt/format.h>

#include <charconv>
#include <utility>

namespace orch {

std::string parse_age(const std::string& text, const std::string& option)
{
    long value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    std::string unit(end, text.data() + text.size());
    static const std::pair<const char*, const char*> k_units[] = {
        {"s", "seconds"}, {"m", "minutes"}, {"h", "hours"}, {"d", "days"}, {"w", "weeks"}};
    if (ec == std::errc() && value > 0 && end != text.data()) {
        for (const auto& [suffix, name] : k_units) {
            if (unit == suffix) {
                return fmt::format("{} {}", value, name);
            }
        }
    }
    throw InvalidInput(fmt::format("{} '{}': expected a positive number with a unit s, m, h, d or w (e.g. 30d)",
                                   option, text));
}

} // namespace orch
