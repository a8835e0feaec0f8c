#include "orchestrator/cron.hpp"

#include <fmt/format.h>

#include <map>
#include <sstream>
#include <vector>

namespace orch {
namespace {

std::vector<std::string> split(const std::string& s, char sep)
{
    std::vector<std::string> out;
    std::string part;
    std::istringstream in(s);
    while (std::getline(in, part, sep)) {
        out.push_back(part);
    }
    return out;
}

bool parse_number(const std::string& s, int& out)
{
    if (s.empty() || s.size() > 4 || s.find_first_not_of("0123456789") != std::string::npos) {
        return false;
    }
    out = std::stoi(s);
    return true;
}

// Parses one field into a bit set over [lo, hi]; false on error.
bool parse_field(const std::string& field, int lo, int hi, unsigned long long& bits)
{
    bits = 0;
    for (const auto& item : split(field, ',')) {
        std::string range = item;
        int step = 1;
        if (auto slash = item.find('/'); slash != std::string::npos) {
            range = item.substr(0, slash);
            if (!parse_number(item.substr(slash + 1), step) || step == 0) {
                return false;
            }
        }
        int a = lo;
        int b = hi;
        if (range != "*") {
            auto dash = range.find('-');
            if (dash == std::string::npos) {
                if (!parse_number(range, a)) {
                    return false;
                }
                b = item.find('/') != std::string::npos ? hi : a;
            } else if (!parse_number(range.substr(0, dash), a) || !parse_number(range.substr(dash + 1), b)) {
                return false;
            }
        }
        if (a < lo || b > hi || a > b) {
            return false;
        }
        for (int v = a; v <= b; v += step) {
            bits |= 1ULL << v;
        }
    }
    return bits != 0;
}

} // namespace

std::optional<CronSchedule> CronSchedule::parse(const std::string& input, std::string* error)
{
    static const std::map<std::string, std::string> k_aliases = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}};
    auto fail = [&](const std::string& why) -> std::optional<CronSchedule> {
        if (error != nullptr) {
            *error = why;
        }
        return std::nullopt;
    };
    std::string text = input;
    CronSchedule s;
    if (text.rfind("@every ", 0) == 0) {
        std::string spec = text.substr(7);
        int n = 0;
        if (spec.size() < 2 || !parse_number(spec.substr(0, spec.size() - 1), n) || n <= 0) {
            return fail(fmt::format("invalid interval '{}' (expected e.g. @every 30m)", spec));
        }
        static const std::map<char, long> k_units = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
        auto unit = k_units.find(spec.back());
        if (unit == k_units.end()) {
            return fail(fmt::format("invalid interval unit in '{}' (s, m, h or d)", spec));
        }
        s.m_every_seconds = n * unit->second;
        return s;
    }
    if (auto alias = k_aliases.find(text); alias != k_aliases.end()) {
        text = alias->second;
    } else if (!text.empty() && text.front() == '@') {
        return fail(fmt::format("unknown schedule alias '{}'", text));
    }
    std::vector<std::string> fields;
    for (const auto& f : split(text, ' ')) {
        if (!f.empty()) {
            fields.push_back(f);
        }
    }
    if (fields.size() != 5) {
        return fail(fmt::format("'{}' is not a cron expression (5 fields: minute hour day month weekday)", input));
    }
    unsigned long long minutes, hours, days, months, weekdays;
    if (!parse_field(fields[0], 0, 59, minutes) || !parse_field(fields[1], 0, 23, hours) ||
        !parse_field(fields[2], 1, 31, days) || !parse_field(fields[3], 1, 12, months) ||
        !parse_field(fields[4], 0, 7, weekdays)) {
        return fail(fmt::format("invalid cron expression '{}'", input));
    }
    if (weekdays & (1ULL << 7)) {
        weekdays |= 1; // 7 is Sunday too
    }
    s.m_minutes = minutes;
    s.m_hours = static_cast<unsigned>(hours);
    s.m_days = static_cast<unsigned>(days);
    s.m_months = static_cast<unsigned>(months);
    s.m_weekdays = static_cast<unsigned>(weekdays);
    // As in Vixie cron, a field starting with '*' ("*", "*/2") counts as unrestricted.
    s.m_days_restricted = fields[2].front() != '*';
    s.m_weekdays_restricted = fields[4].front() != '*';
    // Refused here rather than run on an invented date: the fields are each valid,
    // but no calendar day has them all.
    if (!s.next_after(0)) {
        return fail(fmt::format("cron expression '{}' never matches: no date has that day of the month in those "
                                "months (February has at most 29 days; April, June, September and November 30)",
                                input));
    }
    return s;
}

bool CronSchedule::matches_day(const std::tm& day) const
{
    if (!(m_months & (1u << (day.tm_mon + 1)))) {
        return false;
    }
    bool day_ok = (m_days & (1u << day.tm_mday)) != 0;
    bool weekday_ok = (m_weekdays & (1u << day.tm_wday)) != 0;
    // Standard cron: when both day fields are restricted, either may match.
    return (m_days_restricted && m_weekdays_restricted) ? (day_ok || weekday_ok) : (day_ok && weekday_ok);
}

std::optional<std::time_t> CronSchedule::next_after(std::time_t after) const
{
    if (m_every_seconds > 0) {
        return after + m_every_seconds;
    }
    constexpr std::time_t k_day = 86400;
    // 400 Gregorian years are 146097 days, a whole number of weeks: past them every
    // date falls on the same weekday again, so a day that matches is found within
    // one cycle or never (February 29 on a Sunday comes back after 28 years, not 4).
    constexpr long k_cycle_days = 146097;
    const std::time_t first = (after / 60 + 1) * 60;
    std::time_t midnight = first - ((first % k_day) + k_day) % k_day;
    for (long i = 0; i <= k_cycle_days; ++i, midnight += k_day) {
        std::tm day{};
        gmtime_r(&midnight, &day);
        if (!matches_day(day)) {
            continue;
        }
        for (int hour = 0; hour < 24; ++hour) {
            if (!(m_hours & (1u << hour))) {
                continue;
            }
            for (int minute = 0; minute < 60; ++minute) {
                const std::time_t t = midnight + hour * 3600 + minute * 60;
                if ((m_minutes & (1ULL << minute)) && t >= first) {
                    return t;
                }
            }
        }
    }
    return std::nullopt;
}

} // namespace orch
