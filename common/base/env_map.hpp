#pragma once

#include <map>
#include <string>
#include <vector>

// An environment as a sorted name -> value map: the input to plugin config
// resolution and the output of the hook environment builder.
namespace orch {

using EnvMap = std::map<std::string, std::string>;

// Snapshot of this process's environ. Not thread-safe against concurrent
// setenv(), like getenv() itself.
EnvMap current_environment();

// "NAME=value" strings in map order, for execve()/posix_spawn().
std::vector<std::string> to_env_strings(const EnvMap& env);

} // namespace orch
