#include "common/config/sd_watchdog.hpp"

#include "common/config/sd_notify.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace orch {
namespace {

std::optional<long long> env_number(const char* name)
{
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') {
        return std::nullopt;
    }
    char* end = nullptr;
    errno = 0;
    long long value = std::strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || value <= 0) {
        return std::nullopt;
    }
    return value;
}

} // namespace

std::optional<std::chrono::microseconds> sd_watchdog_interval()
{
    auto usec = env_number("WATCHDOG_USEC");
    if (!usec) {
        return std::nullopt;
    }
    if (std::getenv("WATCHDOG_PID") != nullptr) {
        auto pid = env_number("WATCHDOG_PID");
        if (!pid || *pid != static_cast<long long>(::getpid())) {
            return std::nullopt;
        }
    }
    return std::chrono::microseconds(*usec);
}

SdWatchdog::SdWatchdog()
{
    if (auto interval = sd_watchdog_interval()) {
        m_every = std::chrono::duration_cast<Clock::duration>(*interval) / 2;
    }
}

void SdWatchdog::feed(Clock::time_point now)
{
    if (!enabled() || (m_last != Clock::time_point{} && now - m_last < m_every)) {
        return;
    }
    sd_notify("WATCHDOG=1");
    m_last = now;
}

SdWatchdog::Clock::time_point SdWatchdog::next_due() const noexcept
{
    return enabled() ? m_last + m_every : Clock::time_point::max();
}

} // namespace orch
