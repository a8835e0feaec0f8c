#include "common/hooks/hook_plan.hpp"

#include "common/base/env_map.hpp"
#include "common/base/errors.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

namespace orch {

std::map<std::string, std::vector<ConfiguredHook>> plan_hooks(const PluginRoots& roots,
                                                              const nlohmann::json& crawl_config,
                                                              const std::vector<std::string>& events)
{
    auto catalog = discover_hooks(roots.builtin, roots.user);
    auto env = current_environment();
    std::vector<std::string> known;
    for (const auto& plugin : catalog.plugins) {
        known.push_back(plugin.name);
    }
    if (const auto unknown = unknown_allowed_plugins(env, known); !unknown.empty()) {
        throw ConfigError(fmt::format("PLUGINS lists {} that no plugin directory has (plugins here: {})",
                                      fmt::join(unknown, ", "), known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
    }
    std::map<std::string, PluginConfig> configs;
    for (const auto& plugin : catalog.plugins) {
        configs.emplace(plugin.name,
                        resolve_plugin_config(plugin.name, load_plugin_defaults(plugin.dir), crawl_config, env));
    }
    std::map<std::string, std::vector<ConfiguredHook>> planned;
    for (const auto& event : events) {
        auto& out = planned[event];
        for (const auto& hook : catalog.for_event(event)) {
            const auto& config = configs.at(hook.plugin);
            if (!config.enabled) {
                log::debug("hook disabled by config", {{"hook", hook.id()}});
                continue;
            }
            out.push_back(ConfiguredHook{hook, config});
        }
    }
    return planned;
}

} // namespace orch
