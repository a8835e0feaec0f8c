#include "common/hooks/hook_discovery.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <system_error>

namespace fs = std::filesystem;

namespace orch {
namespace {

constexpr std::size_t k_max_step_digits = 9; // keeps the step within int

bool is_name_char(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

bool fail(std::string* why, std::string text)
{
    if (why) {
        *why = std::move(text);
    }
    return false;
}

// True if `inner` is strictly below `outer`; both canonical.
bool is_strictly_inside(const fs::path& outer, const fs::path& inner)
{
    auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
    return o == outer.end() && i != inner.end();
}

[[noreturn]] void throw_unreadable(const char* what, const fs::path& path, const std::error_code& ec)
{
    throw ConfigError(fmt::format("cannot read {} {}: {}", what, path.string(), ec.message()));
}

// Resolves a directory entry that may be a symlink. Returns the canonical target
// and its status, or nullopt (with `why`) if it leads outside `container`.
std::optional<std::pair<fs::path, fs::file_status>> resolve_entry(const fs::directory_entry& entry,
                                                                  const fs::path& container, std::string* why)
{
    std::error_code ec;
    fs::file_status link_status = entry.symlink_status(ec);
    if (ec) {
        fail(why, fmt::format("cannot stat: {}", ec.message()));
        return std::nullopt;
    }
    if (!fs::is_symlink(link_status)) {
        return std::make_pair(entry.path(), link_status);
    }
    fs::path target = fs::canonical(entry.path(), ec);
    if (ec) {
        fail(why, fmt::format("dangling symlink: {}", ec.message()));
        return std::nullopt;
    }
    if (!is_strictly_inside(container, target)) {
        fail(why, fmt::format("symlink leads outside {} (to {})", container.string(), target.string()));
        return std::nullopt;
    }
    fs::file_status status = fs::status(target, ec);
    if (ec) {
        fail(why, fmt::format("cannot stat symlink target: {}", ec.message()));
        return std::nullopt;
    }
    return std::make_pair(target, status);
}

// Lists a directory, turning every failure into a ConfigError: a plugins
// directory we cannot read is a configuration problem the user must see, not a
// silently smaller set of hooks.
std::vector<fs::directory_entry> list_dir(const char* what, const fs::path& dir)
{
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) {
        throw_unreadable(what, dir, ec);
    }
    std::vector<fs::directory_entry> entries;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
        entries.push_back(*it);
    }
    if (ec) {
        throw_unreadable(what, dir, ec);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
    return entries;
}

void skip(const fs::path& path, const std::string& why)
{
    log::warn("ignoring plugin entry", {{"path", path.string()}, {"reason", why}});
}

void scan_plugin(const Plugin& plugin, std::vector<Hook>& hooks)
{
    for (const auto& entry : list_dir("plugin directory", plugin.dir)) {
        std::string file_name = entry.path().filename().string();
        if (file_name.rfind("on_", 0) != 0) {
            continue; // config.json, helpers, README: not hooks
        }
        std::string why;
        auto parsed = parse_hook_file_name(file_name, &why);
        if (!parsed) {
            skip(entry.path(), why);
            continue;
        }
        auto resolved = resolve_entry(entry, plugin.dir, &why);
        if (!resolved) {
            skip(entry.path(), why);
            continue;
        }
        auto& [target, status] = *resolved;
        if (!fs::is_regular_file(status)) {
            skip(entry.path(), "not a regular file");
            continue;
        }
        Hook hook;
        hook.plugin = plugin.name;
        hook.file_name = file_name;
        hook.event = parsed->event;
        hook.step = parsed->step;
        hook.background = parsed->background;
        hook.path = target;
        hook.interpreter = interpreter_for_extension(parsed->extension);
        auto exec_bits = fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
        if (hook.interpreter.empty() && (status.permissions() & exec_bits) == fs::perms::none) {
            hook.problem = fmt::format("hook {} is not executable and has no known extension (.sh, .py, .js)",
                                       hook.path.string());
        }
        hooks.push_back(std::move(hook));
    }
}

// Adds the plugins of one root to `plugins` unless a plugin of that name is
// already there (roots are visited highest precedence first).
void scan_root(const fs::path& root, bool user, std::map<std::string, Plugin>& plugins)
{
    std::error_code ec;
    fs::path canonical_root = fs::canonical(root, ec);
    if (ec) {
        throw_unreadable("plugins directory", root, ec);
    }
    for (const auto& entry : list_dir("plugins directory", canonical_root)) {
        std::string name = entry.path().filename().string();
        if (name.empty() || name[0] == '.') {
            continue; // hidden entries (.git, editor state)
        }
        std::string why;
        auto resolved = resolve_entry(entry, canonical_root, &why);
        if (!resolved) {
            skip(entry.path(), why);
            continue;
        }
        if (!fs::is_directory(resolved->second)) {
            continue; // README.md and other files at the top level
        }
        if (!is_valid_plugin_name(name)) {
            skip(entry.path(), "plugin directory name must match [a-z0-9_-]+");
            continue;
        }
        auto [it, inserted] = plugins.try_emplace(name, Plugin{name, resolved->first, user});
        if (!inserted) {
            log::info("plugin overridden by a higher-precedence plugins directory",
                      {{"plugin", name}, {"used", it->second.dir.string()}, {"ignored", resolved->first.string()}});
        }
    }
}

} // namespace

std::optional<HookFileName> parse_hook_file_name(std::string_view s, std::string* why)
{
    auto reject = [&](std::string text) -> std::optional<HookFileName> {
        fail(why, std::move(text));
        return std::nullopt;
    };
    if (s.substr(0, 3) != "on_") {
        return reject("hook file names start with \"on_\"");
    }
    s.remove_prefix(3);
    HookFileName out;
    std::size_t sep = s.find("__");
    if (sep == std::string_view::npos || sep == 0) {
        return reject("expected on_<Event>__<NN>_<name>");
    }
    out.event = std::string(s.substr(0, sep));
    if (!std::all_of(out.event.begin(), out.event.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
        return reject("event must match [A-Za-z]+");
    }
    s.remove_prefix(sep + 2);
    std::size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) {
        ++digits;
    }
    if (digits < 2 || digits > k_max_step_digits) {
        return reject(fmt::format("step must be 2 to {} digits", k_max_step_digits));
    }
    out.step = std::stoi(std::string(s.substr(0, digits)));
    s.remove_prefix(digits);
    if (s.empty() || s[0] != '_') {
        return reject("expected '_' after the step number");
    }
    s.remove_prefix(1);
    std::size_t name_len = 0;
    while (name_len < s.size() && is_name_char(s[name_len])) {
        ++name_len;
    }
    if (name_len == 0) {
        return reject("hook name must match [A-Za-z0-9_-]+");
    }
    out.name = std::string(s.substr(0, name_len));
    s.remove_prefix(name_len);
    if (s.substr(0, 3) == ".bg" && (s.size() == 3 || s[3] == '.')) {
        out.background = true;
        s.remove_prefix(3);
    }
    if (!s.empty()) {
        std::string_view ext = s.substr(1);
        if (s[0] != '.' || ext.empty() || !std::all_of(ext.begin(), ext.end(), [](char c) {
                return std::isalnum(static_cast<unsigned char>(c));
            })) {
            return reject("unexpected characters after the hook name (allowed: [.bg][.<ext>])");
        }
        out.extension = std::string(ext);
    }
    return out;
}

bool is_valid_plugin_name(std::string_view name)
{
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

std::vector<std::string> interpreter_for_extension(std::string_view extension)
{
    if (extension == "sh") {
        return {"bash"};
    }
    if (extension == "py") {
        return {"python3"};
    }
    if (extension == "js") {
        return {"node"};
    }
    return {};
}

std::vector<Hook> HookCatalog::for_event(std::string_view event) const
{
    std::vector<Hook> out;
    std::copy_if(hooks.begin(), hooks.end(), std::back_inserter(out),
                 [&](const Hook& h) { return h.event == event; });
    return out;
}

std::optional<Hook> HookCatalog::find(std::string_view hook_id) const
{
    std::size_t slash = hook_id.find('/');
    if (slash == std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view plugin = hook_id.substr(0, slash);
    std::string_view file = hook_id.substr(slash + 1);
    // Validating the shape first means ids like "../x/on_..." or "a/b/c" can never
    // match, whatever the catalog holds.
    if (!is_valid_plugin_name(plugin) || !parse_hook_file_name(file)) {
        return std::nullopt;
    }
    for (const auto& h : hooks) {
        if (h.plugin == plugin && h.file_name == file) {
            return h;
        }
    }
    return std::nullopt;
}

const Plugin* HookCatalog::find_plugin(std::string_view name) const
{
    for (const auto& p : plugins) {
        if (p.name == name) {
            return &p;
        }
    }
    return nullptr;
}

std::vector<fs::path> split_plugin_dirs(std::string_view value)
{
    std::vector<fs::path> out;
    while (!value.empty()) {
        std::size_t colon = value.find(':');
        std::string_view part = value.substr(0, colon);
        if (!part.empty()) {
            out.emplace_back(std::string(part));
        }
        if (colon == std::string_view::npos) {
            break;
        }
        value.remove_prefix(colon + 1);
    }
    return out;
}

HookCatalog discover_hooks(const fs::path& builtin_root, const std::vector<fs::path>& user_roots)
{
    std::map<std::string, Plugin> plugins;
    for (const auto& root : user_roots) {
        scan_root(root, true, plugins);
    }
    if (!builtin_root.empty()) {
        scan_root(builtin_root, false, plugins);
    }
    HookCatalog catalog;
    for (auto& [name, plugin] : plugins) {
        scan_plugin(plugin, catalog.hooks);
        catalog.plugins.push_back(std::move(plugin));
    }
    std::sort(catalog.hooks.begin(), catalog.hooks.end(), [](const Hook& a, const Hook& b) {
        return std::tie(a.step, a.file_name, a.plugin) < std::tie(b.step, b.file_name, b.plugin);
    });
    return catalog;
}

} // namespace orch
