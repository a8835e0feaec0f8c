#pragma once

#include "common/base/env_map.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Effective configuration of one plugin:
//   config.json defaults < crawl config < environment
// Crawl config (the crawl row's JSON object) may use either form:
//   {"plugins": {"wget": {"timeout": 30, "user_agent": "x"}}}   any key
//   {"WGET_TIMEOUT": 30, "WGET_USER_AGENT": "x"}                 declared keys only
// Environment: <PLUGIN>_<KEY> for timeout, enabled, required and every key
// declared in config.json, converted to the declared value's type; and PLUGINS,
// a comma-separated allow-list (when set and non-empty, unlisted plugins are
// disabled). Keys are normalized: lowercase, every non-alphanumeric -> '_'
// ("User-Agent" and "USER_AGENT" are the same key).
namespace orch {

inline constexpr double k_default_timeout_seconds = 60;
inline constexpr double k_max_timeout_seconds = 86400;

struct PluginConfig {
    std::string plugin;
    std::chrono::milliseconds timeout{static_cast<long>(k_default_timeout_seconds * 1000)};
    bool enabled = true;
    bool required = false;
    // Every key (normalized) with its effective value, including "timeout",
    // "enabled" and "required". Always an object.
    nlohmann::json values = nlohmann::json::object();
};

// "wget", "user-agent" -> "WGET_USER_AGENT": uppercase, non-alphanumeric -> '_'.
std::string plugin_env_name(std::string_view plugin, std::string_view key);
// "User-Agent" -> "user_agent".
std::string normalize_config_key(std::string_view key);

// "true/false/1/0/yes/no" (case-insensitive, surrounding blanks ignored).
std::optional<bool> parse_bool_text(std::string_view text);

// Reads <plugin_dir>/config.json. Returns an empty object when the file does
// not exist. Throws orch::ConfigError naming the file when it cannot be read,
// is not a JSON object (bounded parse: size, depth, UTF-8), or has a timeout
// that is not a number in (0, 86400] or enabled/required that are not booleans.
nlohmann::json load_plugin_defaults(const std::filesystem::path& plugin_dir);

// Merges the three layers for `plugin`. `defaults` is what load_plugin_defaults
// returned; `crawl_config` is an object or null. Throws orch::ConfigError
// naming the offending source (crawl config key or environment variable) for
// wrong types or out-of-range values.
PluginConfig resolve_plugin_config(std::string_view plugin, const nlohmann::json& defaults,
                                   const nlohmann::json& crawl_config, const EnvMap& env);

// Names in the PLUGINS allow-list of `env` (comma-separated, blanks ignored)
// that are not in `known`: a typo there would silently disable every plugin,
// and crawls would seal "succeeded" with nothing archived. Empty when PLUGINS
// is unset or blank.
std::vector<std::string> unknown_allowed_plugins(const EnvMap& env, const std::vector<std::string>& known);

} // namespace orch
