#include "common/base/errors.hpp"
#include "common/hooks/plugin_config.hpp"
#include "tests/hooks/temp_tree.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using orch::test::TempTree;
using nlohmann::json;

TEST_CASE("hooks: names: plugin_env_name and normalize_config_key", "[hooks][config]")
{
    CHECK(plugin_env_name("wget", "timeout") == "WGET_TIMEOUT");
    CHECK(plugin_env_name("yt-dlp", "User-Agent") == "YT_DLP_USER_AGENT");
    CHECK(normalize_config_key("User-Agent") == "user_agent");
    CHECK(normalize_config_key("MAX BYTES") == "max_bytes");
}

TEST_CASE("hooks: parse_bool_text", "[hooks][config]")
{
    for (const char* t : {"true", "TRUE", " yes ", "1", "Yes"}) {
        CHECK(parse_bool_text(t) == std::optional<bool>(true));
    }
    for (const char* f : {"false", "0", "no", "NO"}) {
        CHECK(parse_bool_text(f) == std::optional<bool>(false));
    }
    for (const char* bad : {"", "2", "on", "truee"}) {
        CHECK_FALSE(parse_bool_text(bad));
    }
}

TEST_CASE("hooks: load_plugin_defaults: absent file is an empty object", "[hooks][config]")
{
    TempTree t;
    t.mkdir("p");
    CHECK(load_plugin_defaults(t.path() / "p") == json::object());
}

TEST_CASE("hooks: load_plugin_defaults normalizes keys and keeps own keys", "[hooks][config]")
{
    TempTree t;
    t.write("p/config.json", R"({"timeout": 30, "enabled": false, "User-Agent": "x", "max_bytes": 10})");
    json d = load_plugin_defaults(t.path() / "p");
    CHECK(d == json{{"timeout", 30}, {"enabled", false}, {"user_agent", "x"}, {"max_bytes", 10}});
}

TEST_CASE("hooks: load_plugin_defaults: malformed or mistyped config.json is a ConfigError naming file and problem",
          "[hooks][config]")
{
    TempTree t;
    auto check = [&](const std::string& content, const std::string& expected) {
        auto file = t.write("p/config.json", content);
        try {
            load_plugin_defaults(t.path() / "p");
            FAIL("no ConfigError for " << content);
        } catch (const ConfigError& e) {
            std::string m = e.what();
            CHECK_THAT(m, Catch::Contains(file.string()));
            CHECK_THAT(m, Catch::Contains(expected));
        }
    };
    check("{\"timeout\": 60,", "malformed JSON");
    check("", "malformed JSON");
    check("[1, 2]", "must be a JSON object");
    check(R"({"timeout": "60"})", "\"timeout\" must be a number");
    check(R"({"timeout": 0})", "must be > 0");
    check(R"({"timeout": 86401})", "<= 86400");
    check(R"({"timeout": -5})", "must be > 0");
    check(R"({"enabled": "yes"})", "\"enabled\" must be a boolean");
    check(R"({"required": 1})", "\"required\" must be a boolean");
    check("{\"a\": \"\xFF\"}", "invalid UTF-8");
    check("{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}", "nesting deeper than 64");
    check("{\"a\": \"" + std::string(2 * 1024 * 1024, 'x') + "\"}", "larger than");
}

TEST_CASE("hooks: load_plugin_defaults: config.json that is a directory is a ConfigError", "[hooks][config]")
{
    TempTree t;
    t.mkdir("p/config.json");
    CHECK_THROWS_AS(load_plugin_defaults(t.path() / "p"), ConfigError);
}

TEST_CASE("hooks: load_plugin_defaults: a config.json symlink must stay inside the plugin dir", "[hooks][config]")
{
    TempTree t;
    t.write("secret.txt", "top secret, not JSON");
    t.mkdir("p");
    std::filesystem::create_symlink(t.path() / "secret.txt", t.path() / "p/config.json");
    try {
        load_plugin_defaults(t.path() / "p");
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        CHECK_THAT(e.what(), Catch::Contains("outside the plugin directory"));
        CHECK_THAT(e.what(), !Catch::Contains("top secret"));
    }
    t.write("q/defaults.json", R"({"timeout": 5})");
    std::filesystem::create_symlink("defaults.json", t.path() / "q/config.json");
    CHECK(load_plugin_defaults(t.path() / "q")["timeout"] == 5);
}

TEST_CASE("hooks: resolve_plugin_config: built-in defaults when nothing is set", "[hooks][config]")
{
    PluginConfig c = resolve_plugin_config("wget", json::object(), nullptr, {});
    CHECK(c.plugin == "wget");
    CHECK(c.timeout == std::chrono::seconds(60));
    CHECK(c.enabled);
    CHECK_FALSE(c.required);
    CHECK(c.values == json{{"timeout", 60}, {"enabled", true}, {"required", false}});
    CHECK(c.values["timeout"].is_number_integer());
}

TEST_CASE("hooks: resolve_plugin_config: defaults < crawl config < environment", "[hooks][config]")
{
    json defaults = {{"timeout", 30}, {"user_agent", "default-ua"}, {"depth", 1}, {"follow", true}, {"extra", "d"}};

    SECTION("config.json defaults")
    {
        PluginConfig c = resolve_plugin_config("wget", defaults, json::object(), {});
        CHECK(c.timeout == std::chrono::seconds(30));
        CHECK(c.values["user_agent"] == "default-ua");
    }
    SECTION("crawl config, nested form, may add undeclared keys")
    {
        json crawl = json::object();
        crawl["plugins"]["wget"] = {{"timeout", 45}, {"User-Agent", "crawl-ua"}, {"new_key", json::array({1, 2})}};
        PluginConfig c = resolve_plugin_config("wget", defaults, crawl, {});
        CHECK(c.timeout == std::chrono::seconds(45));
        CHECK(c.values["user_agent"] == "crawl-ua");
        CHECK(c.values["new_key"] == json::array({1, 2}));
    }
    SECTION("crawl config, flat form, declared keys only; strings accepted for special keys")
    {
        json crawl = {{"WGET_TIMEOUT", "12.5"}, {"WGET_ENABLED", "no"}, {"wget_user_agent", "flat-ua"},
                      {"WGET_UNDECLARED", "x"}, {"OTHER_TIMEOUT", 1}};
        PluginConfig c = resolve_plugin_config("wget", defaults, crawl, {});
        CHECK(c.timeout == std::chrono::milliseconds(12500));
        CHECK_FALSE(c.enabled);
        CHECK(c.values["user_agent"] == "flat-ua");
        CHECK_FALSE(c.values.contains("undeclared"));
    }
    SECTION("nested beats flat within the crawl config")
    {
        json crawl = {{"WGET_TIMEOUT", 5}, {"plugins", {{"wget", {{"timeout", 6}}}}}};
        CHECK(resolve_plugin_config("wget", defaults, crawl, {}).timeout == std::chrono::seconds(6));
    }
    SECTION("environment beats crawl config and is converted to the declared type")
    {
        json crawl = {{"plugins", {{"wget", {{"timeout", 45}, {"user_agent", "crawl-ua"}}}}}};
        EnvMap env = {{"WGET_TIMEOUT", "90"},  {"WGET_USER_AGENT", "env-ua"}, {"WGET_DEPTH", "3"},
                      {"WGET_FOLLOW", "0"},    {"WGET_REQUIRED", "yes"},     {"WGET_NOT_DECLARED", "x"},
                      {"WGETX_TIMEOUT", "1"}};
        PluginConfig c = resolve_plugin_config("wget", defaults, crawl, env);
        CHECK(c.timeout == std::chrono::seconds(90));
        CHECK(c.required);
        CHECK(c.values["user_agent"] == "env-ua");
        CHECK(c.values["depth"] == 3);
        CHECK(c.values["follow"] == false);
        CHECK_FALSE(c.values.contains("not_declared"));
    }
}

TEST_CASE("hooks: resolve_plugin_config: PLUGINS allow-list disables unlisted plugins", "[hooks][config]")
{
    CHECK(resolve_plugin_config("wget", {}, nullptr, {{"PLUGINS", "title, wget ,pdf"}}).enabled);
    CHECK_FALSE(resolve_plugin_config("chrome", {}, nullptr, {{"PLUGINS", "title,wget"}}).enabled);
    CHECK_FALSE(resolve_plugin_config("wg", {}, nullptr, {{"PLUGINS", "wget"}}).enabled);
    CHECK(resolve_plugin_config("chrome", {}, nullptr, {{"PLUGINS", "  "}}).enabled);  // blank = unset
    // The allow-list cannot enable a plugin switched off by <PLUGIN>_ENABLED.
    CHECK_FALSE(resolve_plugin_config("wget", {}, nullptr, {{"PLUGINS", "wget"}, {"WGET_ENABLED", "false"}}).enabled);
    CHECK(resolve_plugin_config("chrome", {}, nullptr, {{"PLUGINS", "wget"}}).values["enabled"] == false);
}

TEST_CASE("hooks: resolve_plugin_config: bad values name their source", "[hooks][config]")
{
    auto message = [](const json& defaults, const json& crawl, const EnvMap& env) {
        try {
            resolve_plugin_config("wget", defaults, crawl, env);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK_THAT(message({}, nullptr, {{"WGET_TIMEOUT", "soon"}}),
               Catch::Contains("environment variable WGET_TIMEOUT") && Catch::Contains("number"));
    CHECK_THAT(message({}, nullptr, {{"WGET_TIMEOUT", "0"}}), Catch::Contains("must be > 0"));
    CHECK_THAT(message({}, nullptr, {{"WGET_TIMEOUT", "1e9"}}), Catch::Contains("<= 86400"));
    CHECK_THAT(message({}, nullptr, {{"WGET_ENABLED", "maybe"}}), Catch::Contains("WGET_ENABLED") &&
                                                                        Catch::Contains("boolean"));
    CHECK_THAT(message({{"depth", 1}}, nullptr, {{"WGET_DEPTH", "deep"}}), Catch::Contains("WGET_DEPTH"));
    CHECK_THAT(message({{"opts", json::object()}}, nullptr, {{"WGET_OPTS", "[1]"}}), Catch::Contains("JSON object"));
    CHECK_THAT(message({}, {{"plugins", {{"wget", {{"timeout", true}}}}}}, {}),
               Catch::Contains("crawl config plugins.wget.timeout"));
    CHECK_THAT(message({}, {{"WGET_REQUIRED", 3}}, {}), Catch::Contains("crawl config WGET_REQUIRED"));
    CHECK_THAT(message({}, {{"plugins", "wget"}}, {}), Catch::Contains("\"plugins\" must be an object"));
    CHECK_THAT(message({}, {{"plugins", {{"wget", 5}}}}, {}), Catch::Contains("plugins.wget must be an object"));
    CHECK_THAT(message({}, json::array(), {}), Catch::Contains("crawl config must be a JSON object"));
}

TEST_CASE("hooks: resolve_plugin_config reads the repository's own plugin configs", "[hooks][config]")
{
    // Never skip: the source tree is always known (tests/support/test_main.cpp).
    const char* src = std::getenv("ORCH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    std::filesystem::path plugins = std::filesystem::path(src) / "plugins";
    REQUIRE(std::filesystem::is_directory(plugins));
    int resolved = 0;
    for (const auto& entry : std::filesystem::directory_iterator(plugins)) {
        if (entry.is_directory()) {
            INFO(entry.path());
            json d = load_plugin_defaults(entry.path());
            PluginConfig c = resolve_plugin_config(entry.path().filename().string(), d, nullptr, {});
            CHECK(c.timeout > std::chrono::milliseconds(0));
            ++resolved;
        }
    }
    CHECK(resolved >= 3); // chrome, html, visit
}
