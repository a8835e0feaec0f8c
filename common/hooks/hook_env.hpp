#pragma once

#include "common/base/env_map.hpp"
#include "common/hooks/plugin_config.hpp"

#include <filesystem>
#include <optional>
#include <string_view>

// The environment a hook runs with. Built from an allow-list, never by copying
// the parent environment: a hook sees
//   PATH (inherited, else /usr/local/bin:/usr/bin:/bin), HOME, LANG, LC_ALL, TZ,
//   TMPDIR (each only if set in the parent),
//   DATA_DIR, CRAWL_DIR, SNAP_DIR (from the context),
//   <PLUGIN>_<KEY> for every key of its effective plugin config
//     (strings as-is, numbers/booleans as JSON text, objects/arrays as compact JSON),
// minus every name that looks like a secret (is_secret_env_name), whatever its
// source. Plugin config cannot override the fixed names above.
namespace orch {

struct HookContext {
    std::filesystem::path data_dir;
    std::filesystem::path crawl_dir;
    std::optional<std::filesystem::path> snap_dir;  // absent for Crawl/CrawlEnd hooks
};

// DATABASE_URL, TEST_DATABASE_URL, PG*, *PASSWORD*, *SECRET*, *TOKEN*, *_KEY
// (case-insensitive).
bool is_secret_env_name(std::string_view name);

// Pure; `parent` is usually inherited_environment(). Entries whose value holds a
// NUL byte (which exec cannot carry) are dropped with a warning.
EnvMap build_hook_env(const PluginConfig& config, const HookContext& context, const EnvMap& parent);

// The variables of our environment that build_hook_env() reads from its parent
// (PATH and the inherited names above, those that are set): what a launch needs,
// without copying the whole environment once per hook.
EnvMap inherited_environment();

// Copy for storing (process.env column, logs): values of secret-looking names,
// and values that embed URL credentials (scheme://user:password@...), become
// "[redacted]".
EnvMap redact_env(EnvMap env);

} // namespace orch
