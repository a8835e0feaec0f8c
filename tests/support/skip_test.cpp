#include "tests/support/skip_test.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace orch::test {

void skip_test(const std::string& reason)
{
    const std::string line = "SKIPPED: " + Catch::getResultCapture().getCurrentTestName() + ": " + reason;
    std::fprintf(stderr, "%s\n", line.c_str());
    if (const char* log = std::getenv("ORCH_SKIP_LOG"); log != nullptr && *log != '\0') {
        std::ofstream(log, std::ios::app) << line << '\n';
    }
    std::fflush(nullptr);
    // _Exit: Catch's session would otherwise report the test as passed or failed.
    std::_Exit(k_skip_exit_code);
}

} // namespace orch::test
