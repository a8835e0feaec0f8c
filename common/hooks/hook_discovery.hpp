#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Finding hook scripts on disk (the public hook contract, see plugins/README.md).
//
// Layout: <plugins root>/<plugin>/on_<Event>__<NN>_<name>[.bg][.<ext>]
//   plugin  [a-z0-9_-]+         event [A-Za-z]+      NN two or more digits (the step)
//   name    [A-Za-z0-9_-]+      .bg   background hook
//   .sh -> bash, .py -> python3, .js -> node; any other or no extension: executed directly.
//
// Roots: the built-in plugins dir plus user plugin dirs. A plugin of the same name
// in a user dir replaces the built-in plugin as a whole (hooks and config.json);
// among user dirs the first listed wins, as with PATH. Nothing here executes
// anything; discovery only reads directories and stats files.
namespace orch {

// The parts of a hook file name. Pure data.
struct HookFileName {
    std::string event;      // "Snapshot"
    int step = 0;           // NN
    std::string name;       // the <name> part
    bool background = false;
    std::string extension;  // without the dot; empty when there is none
};

// Parses a file name (no directory part). Returns nullopt if it does not follow
// the pattern; `why`, when given, then says what is wrong.
std::optional<HookFileName> parse_hook_file_name(std::string_view file_name, std::string* why = nullptr);

bool is_valid_plugin_name(std::string_view name);

// Interpreter argv prefix for an extension: {"bash"}, {"python3"}, {"node"} or {}
// (executed directly). Names are resolved through PATH by whoever spawns.
std::vector<std::string> interpreter_for_extension(std::string_view extension);

struct Plugin {
    std::string name;
    std::filesystem::path dir;  // canonical absolute path
    bool from_user_dir = false;
};

struct Hook {
    std::string plugin;
    std::string file_name;               // "on_Snapshot__10_wget.sh"
    std::string event;
    int step = 0;
    bool background = false;
    std::filesystem::path path;          // canonical, inside the plugin dir
    std::vector<std::string> interpreter;
    // Non-empty when the hook was found but cannot be run (e.g. a file without a
    // known extension that is not executable). The worker records the hook as
    // failed with this text instead of spawning it.
    std::string problem;

    // Stable identifier "<plugin>/<file_name>", used as hook_name in the database.
    std::string id() const { return plugin + "/" + file_name; }
};

// Everything found, hooks sorted by (step, file_name, plugin).
struct HookCatalog {
    std::vector<Plugin> plugins;  // sorted by name
    std::vector<Hook> hooks;

    // Hooks of one event, in run order.
    std::vector<Hook> for_event(std::string_view event) const;
    // Looks up "<plugin>/<file_name>" (e.g. a hook_name read back from the
    // database). Returns nullopt for unknown names and for names that are not
    // of that shape (path separators, "..", empty parts) without touching disk.
    std::optional<Hook> find(std::string_view hook_id) const;
    const Plugin* find_plugin(std::string_view name) const;
};

// Splits a colon-separated PLUGINS_DIR value; empty entries are dropped.
std::vector<std::filesystem::path> split_plugin_dirs(std::string_view value);

// Scans the roots. Entries that break the contract (bad names, symlinks leading
// outside their plugin dir or root, non-regular files) are skipped with a
// warning naming the entry and the reason.
// Throws orch::ConfigError, naming the path and the errno text, when a root or a
// plugin directory cannot be opened or read (missing, not a directory, EACCES).
HookCatalog discover_hooks(const std::filesystem::path& builtin_root,
                           const std::vector<std::filesystem::path>& user_roots = {});

} // namespace orch
