#pragma once

#include <chrono>
#include <optional>

namespace orch {

// The interval systemd's watchdog expects WATCHDOG=1 within (WatchdogSec=):
// WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process (a child that
// inherited the variables is not the one watched). nullopt otherwise, or when
// the value is malformed.
std::optional<std::chrono::microseconds> sd_watchdog_interval();

// Keeps systemd's watchdog fed from a main loop: feed() sends WATCHDOG=1 once
// half the interval has passed since the last ping, so one late loop turn does
// not get the service killed, while a loop that hangs does (Restart=on-failure
// then starts a fresh one). Disabled (every call a no-op) without a watchdog.
// Not thread-safe; never throws (sd_notify does not).
class SdWatchdog {
public:
    using Clock = std::chrono::steady_clock;

    SdWatchdog();
    bool enabled() const noexcept { return m_every.count() > 0; }
    // Non-blocking: at most one datagram.
    void feed(Clock::time_point now = Clock::now());
    // When feed() should run next; time_point::max() when disabled.
    Clock::time_point next_due() const noexcept;

private:
    Clock::duration m_every{0};
    Clock::time_point m_last{};
};

} // namespace orch
