#include "common/hooks/hook_launch_request.hpp"

#include <utility>

namespace orch {

LaunchRequest hook_launch_request(const Hook& hook, const PluginConfig& config, EnvMap env,
                                  const HookArguments& args, const std::filesystem::path& dir, bool background)
{
    LaunchRequest req;
    req.argv = build_hook_argv(hook, args);
    req.env = std::move(env);
    req.pwd = dir;
    req.log_dir = dir;
    req.name = hook.file_name;
    if (!background) {
        req.timeout_s = std::chrono::duration<double>(config.timeout).count();
    }
    req.labels.plugin = hook.plugin;
    req.labels.hook_name = hook.id();
    req.labels.crawl_id = args.crawl_id;
    return req;
}

} // namespace orch
