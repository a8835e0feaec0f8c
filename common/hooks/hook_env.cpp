#include "common/hooks/hook_env.hpp"

#include "common/base/log.hpp"
#include "common/base/name_memo.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>

namespace orch {
namespace {

constexpr std::string_view k_default_path = "/usr/local/bin:/usr/bin:/bin";
constexpr std::array<std::string_view, 5> k_inherited = {"HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"};
constexpr std::array<std::string_view, 9> k_fixed = {"PATH",   "HOME",     "LANG",      "LC_ALL",  "TZ",
                                                     "TMPDIR", "DATA_DIR", "CRAWL_DIR", "SNAP_DIR"};

std::string upper(std::string_view s)
{
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string value_text(const nlohmann::json& v)
{
    if (v.is_string()) {
        return v.get<std::string>();
    }
    if (v.is_null()) {
        return {};
    }
    // Strings inside objects come from config files or the crawl row and may
    // in theory be ill-formed; replacing beats throwing from dump().
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "scheme://user:password@host": the shape of a database URL with credentials.
bool has_url_credentials(std::string_view value)
{
    std::size_t scheme = value.find("://");
    while (scheme != std::string_view::npos) {
        std::string_view rest = value.substr(scheme + 3);
        std::size_t end = rest.find_first_of("/?# \t");
        std::string_view authority = rest.substr(0, end);
        std::size_t at = authority.rfind('@');
        if (at != std::string_view::npos && authority.substr(0, at).find(':') != std::string_view::npos) {
            return true;
        }
        scheme = value.find("://", scheme + 3);
    }
    return false;
}

bool compute_secret_env_name(std::string_view name)
{
    std::string n = upper(name);
    auto contains = [&](std::string_view part) { return n.find(part) != std::string::npos; };
    auto ends_with = [&](std::string_view suffix) {
        return n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return n == "DATABASE_URL" || n == "TEST_DATABASE_URL" || n.rfind("PG", 0) == 0 || contains("PASSWORD") ||
           contains("SECRET") || contains("TOKEN") || ends_with("_KEY");
}

} // namespace

bool is_secret_env_name(std::string_view name)
{
    return memoized<compute_secret_env_name>(name);
}

EnvMap build_hook_env(const PluginConfig& config, const HookContext& context, const EnvMap& parent)
{
    EnvMap env;
    for (auto& [key, value] : config.values.items()) {
        std::string name = plugin_env_name(config.plugin, key);
        if (std::find(k_fixed.begin(), k_fixed.end(), name) != k_fixed.end()) {
            log::warn("plugin config key ignored: it would replace a fixed hook variable",
                      {{"plugin", config.plugin}, {"key", key}, {"variable", name}});
            continue;
        }
        env[name] = value_text(value);
    }
    auto path = parent.find("PATH");
    env["PATH"] = path != parent.end() && !path->second.empty() ? path->second : std::string(k_default_path);
    for (auto name : k_inherited) {
        if (auto it = parent.find(std::string(name)); it != parent.end()) {
            env[std::string(name)] = it->second;
        }
    }
    env["DATA_DIR"] = context.data_dir.string();
    env["CRAWL_DIR"] = context.crawl_dir.string();
    if (context.snap_dir) {
        env["SNAP_DIR"] = context.snap_dir->string();
    }
    // Last, so that no source (inherited names included) can smuggle a secret in.
    for (auto it = env.begin(); it != env.end();) {
        if (is_secret_env_name(it->first)) {
            log::debug("hook env: dropped secret-looking variable", {{"variable", it->first}});
            it = env.erase(it);
        } else if (it->second.find('\0') != std::string::npos) {
            log::warn("hook env: dropped variable whose value contains a NUL byte", {{"variable", it->first}});
            it = env.erase(it);
        } else {
            ++it;
        }
    }
    return env;
}

EnvMap inherited_environment()
{
    EnvMap env;
    auto take = [&env](std::string_view name) {
        const std::string key(name);
        if (const char* value = std::getenv(key.c_str())) {
            env.emplace(key, value);
        }
    };
    take("PATH");
    for (auto name : k_inherited) {
        take(name);
    }
    return env;
}

EnvMap redact_env(EnvMap env)
{
    for (auto& [name, value] : env) {
        if (is_secret_env_name(name) || has_url_credentials(value)) {
            value = "[redacted]";
        }
    }
    return env;
}

} // namespace orch
