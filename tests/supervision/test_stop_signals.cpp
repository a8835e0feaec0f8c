#include "common/base/stop_signals.hpp"

#include <catch2/catch.hpp>

#include <csignal>

#include <sys/wait.h>
#include <unistd.h>

using namespace orch;

TEST_CASE("a stop request after the run's StopSignals is gone does not kill the process on its way out",
          "[stop_signals]")
{
    // In a child: the run function's StopSignals counts a request, ends, and a
    // second request arrives while the process exits with its own code.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int seen = 0;
        {
            StopSignals stop;
            ::kill(::getpid(), SIGTERM);
            seen = stop.take();
        }
        ::kill(::getpid(), SIGTERM);
        ::kill(::getpid(), SIGINT);
        ::_exit(seen == 1 ? 0 : 3);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
