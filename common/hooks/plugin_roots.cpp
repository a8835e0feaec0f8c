#include "common/hooks/plugin_roots.hpp"

#include "common/hooks/hook_discovery.hpp"

#include <cstdlib>

namespace orch {

PluginRoots plugin_roots(const std::string& plugins_dir_option)
{
    PluginRoots roots;
    if (const char* env = std::getenv("ORCH_BUILTIN_PLUGINS_DIR"); env != nullptr) {
        roots.builtin = env;
    } else {
        roots.builtin = ORCH_DEFAULT_PLUGINS_DIR;
    }
    roots.user = split_plugin_dirs(plugins_dir_option);
    return roots;
}

} // namespace orch
