#include "orchestrator/commands.hpp"

#include "common/supervision/containment.hpp"
#include "common/base/env_map.hpp"
#include "common/base/errors.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "common/db/machine.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/hooks/plugin_roots.hpp"
#include "common/config/settings.hpp"
#include "orchestrator/metrics_server.hpp"
#include "orchestrator/table_format.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>

namespace orch {
namespace {

// One line of the report; the same fields in text and JSON.
struct Entry {
    std::string section; // option | setting | plugin
    std::string name;    // --max-crawl-workers, LEASE_TTL, WGET_TIMEOUT
    std::string variable;// its environment variable, if any
    std::string value;   // as the program will use it
    std::string source;  // command line | environment | default | config.json | host
    std::string error;   // non-empty: the value is refused
    std::string note;    // range, readers, plugin
    std::string plugin_dir;
};

const char* env_value(const std::string& name)
{
    if (name.empty()) {
        return nullptr;
    }
    const char* v = std::getenv(name.c_str());
    return v == nullptr || *v == '\0' ? nullptr : v;
}

bool on_command_line(const std::vector<std::string>& args, const std::string& option)
{
    return std::any_of(args.begin(), args.end(),
                       [&](const std::string& a) { return a == option || a.rfind(option + "=", 0) == 0; });
}

// A connection string without its password, in the form it was given (URI or
// key=value); libpq's own parser finds the password in either.
std::string without_password(const std::string& conninfo)
{
    char* err = nullptr;
    std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> parsed(PQconninfoParse(conninfo.c_str(), &err),
                                                                        &PQconninfoFree);
    if (err != nullptr) {
        PQfreemem(err);
    }
    if (!parsed) {
        return "<not a valid connection string>";
    }
    std::vector<std::string> parts;
    for (auto* o = parsed.get(); o->keyword != nullptr; ++o) {
        if (o->val == nullptr) {
            continue;
        }
        const std::string key = o->keyword;
        parts.push_back(key + "=" + (key == "password" ? std::string("<redacted>") : std::string(o->val)));
    }
    return fmt::format("{}", fmt::join(parts, " "));
}

void add_options(std::vector<Entry>& out, const CLI::App& app, const std::vector<std::string>& args,
                 const std::vector<ShownOption>& options)
{
    for (const auto& shown : options) {
        const auto* opt = app.get_option_no_throw(shown.name);
        Entry e{"option", shown.name, opt != nullptr ? opt->get_envname() : "", shown.value, "default", "", ""};
        if (on_command_line(args, shown.name)) {
            e.source = "command line";
        } else if (opt != nullptr && opt->count() > 0) {
            e.source = "environment";
        }
        if (shown.name == "--data-dir") {
            // As the executables will resolve it, without creating it.
            CommonOptions resolved;
            resolved.data_dir = shown.value;
            try {
                e.value = data_dir_path(resolved).string();
            } catch (const ConfigError& err) {
                e.error = err.what();
            }
        }
        if (shown.name == "--machine-id" && shown.value.empty()) {
            e.source = "host";
            try {
                e.value = detect_machine(std::nullopt).id;
            } catch (const std::exception& err) {
                e.error = fmt::format("cannot derive the machine id: {}", err.what());
            }
        }
        if (shown.name == "--metrics-listen" && !shown.value.empty()) {
            try {
                parse_metrics_listen(shown.value);
            } catch (const InvalidInput& err) {
                e.error = err.what();
            }
        }
        if (shown.name == "--database-url") {
            e.value = shown.value.empty() ? "embedded cluster under the data directory" : without_password(shown.value);
        }
        out.push_back(std::move(e));
    }
}

void add_settings(std::vector<Entry>& out)
{
    for (const auto& state : settings_state()) {
        const auto& s = *state.setting;
        Entry e{"setting", s.name, s.name, "", state.raw ? "environment" : "default", state.error, ""};
        e.value = state.value ? std::to_string(*state.value) : *state.raw;
        e.note = fmt::format("{} to {}{}{}; {}", s.min, s.max, *s.unit != '\0' ? " " : "", s.unit, s.read_by);
        out.push_back(std::move(e));
    }
    Entry containment{"setting", "ORCH_CONTAINMENT", "ORCH_CONTAINMENT", "probed at start", "default", "", ""};
    if (const char* v = env_value("ORCH_CONTAINMENT")) {
        containment.value = v;
        containment.source = "environment";
    }
    try {
        forced_containment_from_env();
    } catch (const ConfigError& err) {
        containment.error = err.what();
    }
    containment.note = "fallback, freezer or cgroup2; all three";
    out.push_back(std::move(containment));
}

void add_plugins(std::vector<Entry>& out, const std::string& plugins_dir)
{
    HookCatalog catalog;
    PluginRoots roots;
    try {
        roots = plugin_roots(plugins_dir);
        catalog = discover_hooks(roots.builtin, roots.user);
    } catch (const ConfigError& err) {
        out.push_back(Entry{"plugin", "plugins", "PLUGINS_DIR", plugins_dir, "", err.what(), ""});
        return;
    }
    out.push_back(Entry{"setting", "ORCH_BUILTIN_PLUGINS_DIR", "ORCH_BUILTIN_PLUGINS_DIR",
                        roots.builtin.empty() ? "none" : roots.builtin.string(),
                        std::getenv("ORCH_BUILTIN_PLUGINS_DIR") != nullptr ? "environment" : "default", "",
                        "built-in plugins"});
    const char* allow = env_value("PLUGINS");
    const auto env = current_environment();
    std::vector<std::string> known;
    for (const auto& plugin : catalog.plugins) {
        known.push_back(plugin.name);
    }
    const auto unknown = unknown_allowed_plugins(env, known);
    out.push_back(Entry{"setting", "PLUGINS", "PLUGINS", allow != nullptr ? allow : "all",
                        allow != nullptr ? "environment" : "default",
                        unknown.empty() ? ""
                                        : fmt::format("PLUGINS lists {} that no plugin directory has",
                                                      fmt::join(unknown, ", ")),
                        "allow-list of plugins"});
    for (const auto& plugin : catalog.plugins) {
        const auto hooks = std::count_if(catalog.hooks.begin(), catalog.hooks.end(),
                                         [&](const Hook& h) { return h.plugin == plugin.name; });
        const auto note = fmt::format("{}, {} hook{}", plugin.name, hooks, hooks == 1 ? "" : "s");
        try {
            const auto defaults = load_plugin_defaults(plugin.dir);
            const auto config = resolve_plugin_config(plugin.name, defaults, nullptr, env);
            for (const auto& [key, value] : config.values.items()) {
                const auto variable = plugin_env_name(plugin.name, key);
                bool declared = false;
                for (const auto& [k, v] : defaults.items()) {
                    declared = declared || normalize_config_key(k) == key;
                }
                Entry e{"plugin", variable, variable, value.is_string() ? value.get<std::string>() : value.dump(),
                        env_value(variable) != nullptr ? "environment" : declared ? "config.json" : "default", "",
                        note, plugin.dir.string()};
                if (key == "enabled" && env_value(variable) == nullptr && allow != nullptr && !config.enabled) {
                    e.source = "PLUGINS";
                }
                out.push_back(std::move(e));
            }
        } catch (const ConfigError& err) {
            out.push_back(Entry{"plugin", plugin.name, "", "", "", err.what(), note, plugin.dir.string()});
        }
    }
}

void print_text(const std::vector<Entry>& entries)
{
    const std::vector<std::pair<std::string, std::string>> sections{
        {"option", "Orchestrator options (command line > environment > default)"},
        {"setting", "Settings from the environment (every executable checks them all at start; workers inherit them)"},
        {"plugin", "Plugin configuration (environment > config.json > default; a crawl's config goes between "
                   "the last two)"}};
    bool first = true;
    for (const auto& [section, title] : sections) {
        const std::string last = section == "plugin" ? "PLUGIN" : "RANGE; READ BY";
        TextTable table(section == "option" ? std::vector<std::string>{"OPTION", "VARIABLE", "VALUE", "SOURCE"}
                                            : std::vector<std::string>{"VARIABLE", "VALUE", "SOURCE", last});
        for (const auto& e : entries) {
            if (e.section != section) {
                continue;
            }
            const auto value = !e.error.empty() ? "INVALID: " + one_line(e.error, 200)
                               : e.value.empty()  ? std::string("(empty)")
                                                  : one_line(e.value, 100);
            if (section == "option") {
                table.add_row({e.name, e.variable.empty() ? "-" : e.variable, value, e.source});
            } else {
                table.add_row({e.name, value, e.source.empty() ? "-" : e.source, e.note});
            }
        }
        if (table.empty()) {
            continue;
        }
        std::cout << (first ? "" : "\n") << title << "\n";
        table.print(std::cout);
        first = false;
    }
}

} // namespace

void command_config_show(const CLI::App& app, const std::vector<std::string>& args,
                         const std::vector<ShownOption>& options, const std::string& plugins_dir, bool json)
{
    std::vector<Entry> entries;
    add_options(entries, app, args, options);
    add_settings(entries);
    add_plugins(entries, plugins_dir);
    if (json) {
        for (const auto& e : entries) {
            nlohmann::json j{{"section", e.section}, {"name", e.name}, {"value", e.value}, {"source", e.source}};
            if (!e.variable.empty()) {
                j["variable"] = e.variable;
            }
            if (!e.note.empty()) {
                j["note"] = e.note;
            }
            if (!e.plugin_dir.empty()) {
                j["plugin_dir"] = e.plugin_dir;
            }
            if (!e.error.empty()) {
                j["error"] = e.error;
            }
            std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        }
    } else {
        print_text(entries);
    }
    std::cout.flush();
    std::vector<std::string> problems;
    for (const auto& e : entries) {
        if (!e.error.empty()) {
            problems.push_back(e.error);
        }
    }
    if (!problems.empty()) {
        throw ConfigError(fmt::format("{} invalid: {}", problems.size() == 1 ? "one setting is" : "settings are",
                                      fmt::join(problems, "; ")));
    }
}

} // namespace orch
