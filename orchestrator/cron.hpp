#pragma once

#include <ctime>
#include <optional>
#include <string>

namespace orch {

// A crawl schedule: a 5-field cron expression (minute hour day-of-month month
// day-of-week; `*`, lists, ranges and steps), an alias (@hourly, @daily,
// @midnight, @weekly, @monthly, @yearly, @annually), or "@every <N><s|m|h|d>".
// Times are UTC.
class CronSchedule {
public:
    // nullopt (with `error` set) when the text is not a schedule, or is a cron
    // expression that never matches (February 30, April 31).
    static std::optional<CronSchedule> parse(const std::string& text, std::string* error = nullptr);

    // The first due time strictly after `after` (seconds since the epoch), or
    // nullopt when the expression matches no time at all. A cron expression is
    // searched over a whole 400-year Gregorian cycle, after which the calendar
    // repeats, so nullopt means never, not "not soon".
    std::optional<std::time_t> next_after(std::time_t after) const;

private:
    CronSchedule() = default;
    // Whether the date of `day` (gmtime of a midnight) satisfies the day-of-month,
    // month and weekday fields.
    bool matches_day(const std::tm& day) const;

    long m_every_seconds = 0; // > 0 for @every
    unsigned long long m_minutes = 0; // bit sets of allowed values
    unsigned m_hours = 0;
    unsigned m_days = 0;
    unsigned m_months = 0;
    unsigned m_weekdays = 0;
    bool m_days_restricted = false;
    bool m_weekdays_restricted = false;
};

} // namespace orch
