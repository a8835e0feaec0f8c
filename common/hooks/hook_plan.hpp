#pragma once

#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/hooks/plugin_roots.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace orch {

// A hook that will run, with its plugin's effective configuration.
struct ConfiguredHook {
    Hook hook;
    PluginConfig config;
};

// Discovers the hooks under `roots`, resolves each plugin's configuration
// (config.json < crawl config < environment) and returns, for every event asked
// for, its enabled hooks in run order. Everything that can be wrong with plugins
// (unreadable directories, malformed config.json, bad values) throws ConfigError
// here, so a worker finds it before it claims any work.
std::map<std::string, std::vector<ConfiguredHook>> plan_hooks(const PluginRoots& roots,
                                                              const nlohmann::json& crawl_config,
                                                              const std::vector<std::string>& events);

} // namespace orch
