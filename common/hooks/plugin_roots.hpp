#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace orch {

// Where hooks come from: the built-in plugins directory (ORCH_BUILTIN_PLUGINS_DIR
// if set, empty = none; else <repo>/plugins as built), and the user directories
// (--plugins-dir / PLUGINS_DIR, colon-separated).
struct PluginRoots {
    std::filesystem::path builtin; // empty = no built-in plugins
    std::vector<std::filesystem::path> user;
};

PluginRoots plugin_roots(const std::string& plugins_dir_option);

} // namespace orch
