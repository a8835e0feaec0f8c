#pragma once

#include <cstdint>

namespace orch {

// Numeric settings from the environment (docs/configuration.md). Each returns
// `fallback` when the variable is unset or empty, and throws ConfigError naming
// the variable, the accepted range and the value when it is anything but a whole
// number in [min, max]: a typo never silently becomes the default. Read them at
// start, before anything is claimed or written.
int env_int(const char* name, int fallback, int min, int max);
std::uint64_t env_uint64(const char* name, std::uint64_t fallback, std::uint64_t min, std::uint64_t max);

} // namespace orch
