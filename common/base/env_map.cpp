#include "common/base/env_map.hpp"

#include <cstring>

extern char** environ;

namespace orch {

EnvMap current_environment()
{
    EnvMap env;
    for (char** p = environ; p && *p; ++p) {
        const char* eq = std::strchr(*p, '=');
        if (eq && eq != *p) {
            // First definition wins, matching getenv() on duplicate entries.
            env.emplace(std::string(*p, static_cast<std::size_t>(eq - *p)), std::string(eq + 1));
        }
    }
    return env;
}

std::vector<std::string> to_env_strings(const EnvMap& env)
{
    std::vector<std::string> out;
    out.reserve(env.size());
    for (const auto& [name, value] : env) {
        out.push_back(name + "=" + value);
    }
    return out;
}

} // namespace orch
