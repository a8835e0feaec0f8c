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

// HOOK_LOG_MAX_BYTES: the on-disk bound of each child's stdout/stderr log
// (SupervisorOptions::max_log_bytes), 64 KiB to 1 TiB, default 64 MiB.
std::uint64_t hook_log_max_bytes_from_env();

} // namespace orch
