#pragma once

#include "common/base/env_map.hpp"
#include "common/hooks/hook_argv.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/supervision/launch_request.hpp"

#include <filesystem>

// What every hook start asks of the supervisor, crawl hook or snapshot hook:
// its argv, environment, directory, name, timeout and labels.
namespace orch {

// The launch request of `hook` run with `args` in `dir` (its working and log
// directory, which Supervisor::launch creates) under `env`. A foreground hook
// gets its config's timeout; a background one none: it lives as long as its
// snapshot or crawl, so the teardown grace alone bounds its stop. The caller
// adds the row's links beyond the crawl (snapshot, result). Throws
// std::invalid_argument when an argument holds a NUL byte (build_hook_argv).
LaunchRequest hook_launch_request(const Hook& hook, const PluginConfig& config, EnvMap env,
                                  const HookArguments& args, const std::filesystem::path& dir, bool background);

} // namespace orch
