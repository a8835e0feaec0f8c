#include "common/hooks/plugin_config.hpp"

#include "common/base/bounded_json.hpp"
#include "common/base/errors.hpp"
#include "common/base/fd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <system_error>
#include <unistd.h>

namespace fs = std::filesystem;

namespace orch {
namespace {

constexpr std::uintmax_t k_max_config_file_bytes = 1024 * 1024;

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.remove_suffix(1);
    }
    return s;
}

// Value checks shared by all layers; `source` names where the value came from
// and returns the problem, or an empty string when the value is acceptable.
std::string check_timeout(const nlohmann::json& v)
{
    if (!v.is_number()) {
        return fmt::format("must be a number of seconds, got {}", v.type_name());
    }
    double seconds = v.get<double>();
    if (!(seconds > 0 && seconds <= k_max_timeout_seconds)) {
        return fmt::format("must be > 0 and <= {}, got {}", k_max_timeout_seconds, v.dump());
    }
    return {};
}

std::string check_special(const std::string& key, const nlohmann::json& v)
{
    if (key == "timeout") {
        return check_timeout(v);
    }
    if ((key == "enabled" || key == "required") && !v.is_boolean()) {
        return fmt::format("must be a boolean, got {}", v.type_name());
    }
    return {};
}

// Text (environment, or strings in flat crawl keys) -> a value of the kind
// `like` has. Returns nullopt when the text does not fit that kind.
std::optional<nlohmann::json> from_text(std::string_view text, const nlohmann::json& like)
{
    if (like.is_boolean()) {
        auto b = parse_bool_text(text);
        return b ? std::optional<nlohmann::json>(*b) : std::nullopt;
    }
    if (like.is_number() || like.is_object() || like.is_array()) {
        try {
            nlohmann::json v = parse_bounded_json(trim(text));
            bool fits = like.is_number() ? v.is_number() : v.type() == like.type();
            return fits ? std::optional<nlohmann::json>(std::move(v)) : std::nullopt;
        } catch (const JsonInputError&) {
            return std::nullopt;
        }
    }
    return nlohmann::json(std::string(text));
}

const char* kind_name(const nlohmann::json& like)
{
    if (like.is_boolean()) {
        return "a boolean (true/false/1/0/yes/no)";
    }
    if (like.is_number()) {
        return "a number";
    }
    if (like.is_object()) {
        return "a JSON object";
    }
    if (like.is_array()) {
        return "a JSON array";
    }
    return "a string";
}

class Merger {
public:
    explicit Merger(nlohmann::json values) : m_values(std::move(values)) {}

    // A JSON value from the crawl config; special keys may also arrive as text.
    void set_json(const std::string& key, const nlohmann::json& v, const std::string& source)
    {
        nlohmann::json value = v;
        if (v.is_string() && (key == "timeout" || key == "enabled" || key == "required")) {
            value = coerce(key, v.get<std::string>(), source);
        }
        if (auto problem = check_special(key, value); !problem.empty()) {
            throw ConfigError(fmt::format("{}: {}", source, problem));
        }
        m_values[key] = std::move(value);
    }

    void set_text(const std::string& key, std::string_view text, const std::string& source)
    {
        nlohmann::json value = coerce(key, text, source);
        if (auto problem = check_special(key, value); !problem.empty()) {
            throw ConfigError(fmt::format("{}: {}", source, problem));
        }
        m_values[key] = std::move(value);
    }

    nlohmann::json& values() { return m_values; }

private:
    nlohmann::json coerce(const std::string& key, std::string_view text, const std::string& source)
    {
        nlohmann::json like = m_values.contains(key) ? m_values[key] : nlohmann::json(std::string());
        if (key == "timeout") {
            like = 0;
        } else if (key == "enabled" || key == "required") {
            like = false;
        }
        auto value = from_text(text, like);
        if (!value) {
            throw ConfigError(fmt::format("{}: expected {}, got \"{}\"", source, kind_name(like),
                                          std::string(text.substr(0, 100))));
        }
        return *value;
    }

    nlohmann::json m_values;
};

std::string env_style(std::string_view key)
{
    std::string out = normalize_config_key(key);
    for (char& c : out) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string read_bounded(const fs::path& file)
{
    Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        throw ConfigError(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
    }
    std::string text;
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw ConfigError(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
        }
        if (n == 0) {
            return text;
        }
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > k_max_config_file_bytes) {
            throw ConfigError(fmt::format("{}: larger than {} bytes", file.string(), k_max_config_file_bytes));
        }
    }
}

} // namespace

std::string normalize_config_key(std::string_view key)
{
    std::string out;
    out.reserve(key.size());
    for (char c : key) {
        auto u = static_cast<unsigned char>(c);
        out += std::isalnum(u) && u < 0x80 ? static_cast<char>(std::tolower(u)) : '_';
    }
    return out;
}

std::string plugin_env_name(std::string_view plugin, std::string_view key)
{
    return env_style(plugin) + "_" + env_style(key);
}

std::optional<bool> parse_bool_text(std::string_view text)
{
    std::string t = lower(trim(text));
    if (t == "true" || t == "1" || t == "yes") {
        return true;
    }
    if (t == "false" || t == "0" || t == "no") {
        return false;
    }
    return std::nullopt;
}

nlohmann::json load_plugin_defaults(const fs::path& plugin_dir)
{
    fs::path file = plugin_dir / "config.json";
    std::error_code ec;
    auto status = fs::symlink_status(file, ec);
    if (ec == std::errc::no_such_file_or_directory) {
        return nlohmann::json::object();
    }
    if (ec) {
        throw ConfigError(fmt::format("{}: {}", file.string(), ec.message()));
    }
    if (fs::is_symlink(status)) {
        // Parse errors quote the text they choke on; a link to an arbitrary
        // file must not turn config loading into a way of printing it.
        fs::path target = fs::canonical(file, ec);
        fs::path dir = fs::canonical(plugin_dir, ec);
        auto [d, t] = std::mismatch(dir.begin(), dir.end(), target.begin(), target.end());
        if (ec || d != dir.end() || t == target.end()) {
            throw ConfigError(fmt::format("{}: symlink leading outside the plugin directory", file.string()));
        }
        status = fs::status(target, ec);
    }
    if (!fs::is_regular_file(status)) {
        throw ConfigError(fmt::format("{}: not a regular file", file.string()));
    }
    std::string text = read_bounded(file);
    nlohmann::json raw;
    try {
        raw = parse_bounded_json(text);
    } catch (const JsonInputError& e) {
        throw ConfigError(fmt::format("{}: malformed JSON: {}", file.string(), e.what()));
    }
    if (!raw.is_object()) {
        throw ConfigError(fmt::format("{}: must be a JSON object, got {}", file.string(), raw.type_name()));
    }
    nlohmann::json defaults = nlohmann::json::object();
    for (auto& [key, value] : raw.items()) {
        std::string k = normalize_config_key(key);
        if (k.empty()) {
            throw ConfigError(fmt::format("{}: empty key", file.string()));
        }
        if (auto problem = check_special(k, value); !problem.empty()) {
            throw ConfigError(fmt::format("{}: \"{}\" {}", file.string(), key, problem));
        }
        defaults[k] = value;
    }
    return defaults;
}

PluginConfig resolve_plugin_config(std::string_view plugin, const nlohmann::json& defaults,
                                   const nlohmann::json& crawl_config, const EnvMap& env)
{
    // An integer, so hooks see WGET_TIMEOUT=60 rather than 60.0 (shell arithmetic).
    nlohmann::json base = {{"timeout", static_cast<int>(k_default_timeout_seconds)}, {"enabled", true}, {"required", false}};
    if (defaults.is_object()) {
        for (auto& [key, value] : defaults.items()) {
            base[normalize_config_key(key)] = value;
        }
    }
    // Keys a flat crawl key or an environment variable may set; anything else
    // (e.g. WGET_EXTRA for a plugin that never declared "extra") is not ours.
    std::set<std::string> declared;
    for (auto& [key, value] : base.items()) {
        declared.insert(key);
    }
    Merger merged(std::move(base));

    if (!crawl_config.is_null() && !crawl_config.is_object()) {
        throw ConfigError(fmt::format("crawl config must be a JSON object, got {}", crawl_config.type_name()));
    }
    if (crawl_config.is_object()) {
        for (const auto& key : declared) {
            std::string name = plugin_env_name(plugin, key);
            for (auto& [ckey, value] : crawl_config.items()) {
                if (env_style(ckey) == name) {
                    merged.set_json(key, value, fmt::format("crawl config {}", ckey));
                }
            }
        }
        auto plugins = crawl_config.find("plugins");
        if (plugins != crawl_config.end() && !plugins->is_null()) {
            if (!plugins->is_object()) {
                throw ConfigError("crawl config \"plugins\" must be an object of plugin name -> settings");
            }
            auto own = plugins->find(std::string(plugin));
            if (own != plugins->end() && !own->is_null()) {
                if (!own->is_object()) {
                    throw ConfigError(fmt::format("crawl config plugins.{} must be an object", plugin));
                }
                for (auto& [key, value] : own->items()) {
                    merged.set_json(normalize_config_key(key), value,
                                    fmt::format("crawl config plugins.{}.{}", plugin, key));
                }
            }
        }
    }

    for (const auto& key : declared) {
        std::string name = plugin_env_name(plugin, key);
        if (auto it = env.find(name); it != env.end()) {
            merged.set_text(key, it->second, fmt::format("environment variable {}", name));
        }
    }

    nlohmann::json& values = merged.values();
    if (auto it = env.find("PLUGINS"); it != env.end() && !trim(it->second).empty()) {
        bool listed = false;
        std::string_view list = it->second;
        while (!list.empty() && !listed) {
            std::size_t comma = list.find(',');
            listed = trim(list.substr(0, comma)) == plugin;
            list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
        }
        if (!listed) {
            values["enabled"] = false;
        }
    }

    PluginConfig out;
    out.plugin = std::string(plugin);
    double seconds = values["timeout"].get<double>();
    out.timeout = std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
    out.enabled = values["enabled"].get<bool>();
    out.required = values["required"].get<bool>();
    out.values = std::move(values);
    return out;
}

std::vector<std::string> unknown_allowed_plugins(const EnvMap& env, const std::vector<std::string>& known)
{
    std::vector<std::string> unknown;
    const auto it = env.find("PLUGINS");
    if (it == env.end()) {
        return unknown;
    }
    std::string_view list = it->second;
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const auto name = trim(list.substr(0, comma));
        if (!name.empty() && std::find(known.begin(), known.end(), name) == known.end()) {
            unknown.emplace_back(name);
        }
        list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
    }
    return unknown;
}

} // namespace orch
