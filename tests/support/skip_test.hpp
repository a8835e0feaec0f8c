#pragma once

#include <string>

namespace orch::test {

// The exit code of a skipped test; ctest reports it as "Skipped" (SKIP_RETURN_CODE,
// set for every discovered test in tests/CMakeLists.txt).
constexpr int k_skip_exit_code = 77;

// For a test that cannot run its subject on this machine (no cgroup2, no v1
// freezer): prints "SKIPPED: <test>: <reason>" on stderr, appends the same line
// to the file named by ORCH_SKIP_LOG when set (scripts/test lists that file at
// the end), and ends the process with k_skip_exit_code. Never returns; what the
// test set up so far is not cleaned up, so call it before the test makes anything.
// A skip is never silent: run by hand, the test program stops with code 77.
[[noreturn]] void skip_test(const std::string& reason);

} // namespace orch::test
