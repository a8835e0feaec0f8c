#include "common/config/env_setting.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace orch {
namespace {

// The variable's value, or nullptr when unset or empty.
const char* value_of(const char* name)
{
    const char* v = std::getenv(name);
    return v == nullptr || *v == '\0' ? nullptr : v;
}

} // namespace

int env_int(const char* name, int fallback, int min, int max)
{
    const char* v = value_of(name);
    if (v == nullptr) {
        return fallback;
    }
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < min || n > max) {
        throw ConfigError(fmt::format("{} must be a whole number from {} to {}, got '{}'", name, min, max, v));
    }
    return static_cast<int>(n);
}

std::uint64_t env_uint64(const char* name, std::uint64_t fallback, std::uint64_t min, std::uint64_t max)
{
    const char* v = value_of(name);
    if (v == nullptr) {
        return fallback;
    }
    char* end = nullptr;
    errno = 0;
    // strtoull accepts a sign ("-1" wraps around): only digits are a number here.
    const bool digits = *v >= '0' && *v <= '9';
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (!digits || errno != 0 || *end != '\0' || n < min || n > max) {
        throw ConfigError(fmt::format("{} must be a whole number from {} to {}, got '{}'", name, min, max, v));
    }
    return n;
}

} // namespace orch
