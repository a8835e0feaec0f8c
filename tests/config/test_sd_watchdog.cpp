// systemd's watchdog contract: whose WATCHDOG_USEC it is, and how often it is fed.

#include "common/config/sd_watchdog.hpp"
#include "tests/support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>

using namespace orch;
using orch::test::ScopedEnv;
using namespace std::chrono_literals;

TEST_CASE("sd watchdog: WATCHDOG_USEC is ours only when WATCHDOG_PID is unset or names us", "[sd_notify]")
{
    const auto self = std::to_string(::getpid());
    ScopedEnv no_socket("NOTIFY_SOCKET", nullptr); // feed() sends nothing anywhere
    {
        ScopedEnv usec("WATCHDOG_USEC", nullptr);
        ScopedEnv pid("WATCHDOG_PID", nullptr);
        CHECK_FALSE(sd_watchdog_interval());
        SdWatchdog w;
        CHECK_FALSE(w.enabled());
        CHECK(w.next_due() == SdWatchdog::Clock::time_point::max());
    }
    {
        ScopedEnv usec("WATCHDOG_USEC", "30000000");
        ScopedEnv pid("WATCHDOG_PID", nullptr);
        CHECK(sd_watchdog_interval() == std::chrono::microseconds(30'000'000));
    }
    {
        ScopedEnv usec("WATCHDOG_USEC", "30000000");
        ScopedEnv pid("WATCHDOG_PID", self.c_str());
        CHECK(sd_watchdog_interval() == std::chrono::microseconds(30'000'000));
    }
    {
        // Inherited from a watched parent: not ours.
        ScopedEnv usec("WATCHDOG_USEC", "30000000");
        ScopedEnv pid("WATCHDOG_PID", "1");
        CHECK_FALSE(sd_watchdog_interval());
        CHECK_FALSE(SdWatchdog().enabled());
    }
    for (const char* bad : {"", "0", "-5", "12abc", "99999999999999999999999"}) {
        ScopedEnv usec("WATCHDOG_USEC", bad);
        ScopedEnv pid("WATCHDOG_PID", nullptr);
        INFO("WATCHDOG_USEC=" << bad);
        CHECK_FALSE(sd_watchdog_interval());
    }
}

TEST_CASE("sd watchdog: fed at most once per half interval", "[sd_notify]")
{
    ScopedEnv no_socket("NOTIFY_SOCKET", nullptr);
    ScopedEnv usec("WATCHDOG_USEC", "10000000"); // 10 s: fed every 5 s
    ScopedEnv pid("WATCHDOG_PID", nullptr);
    SdWatchdog w;
    REQUIRE(w.enabled());
    const auto t0 = SdWatchdog::Clock::now();
    w.feed(t0);
    CHECK(w.next_due() == t0 + 5s);
    w.feed(t0 + 4s); // too early: nothing sent, the due time stays
    CHECK(w.next_due() == t0 + 5s);
    w.feed(t0 + 6s);
    CHECK(w.next_due() == t0 + 11s);
}
