#pragma once

#include <map>
#include <string>
#include <vector>

namespace orch::test {

struct CommandResult {
    int exit_code = -1;   // -1 if killed by a signal
    int signal = 0;
    std::string out;
    std::string err;
};

// Runs an executable to completion with extra environment variables (empty value
// = unset), stdin from `input`. For driving the real binaries in tests.
CommandResult run_command(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                          const std::string& input = {});

} // namespace orch::test
