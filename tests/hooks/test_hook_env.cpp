#include "common/hooks/hook_argv.hpp"
#include "common/hooks/hook_env.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace orch;
using nlohmann::json;

namespace {

PluginConfig config_with(json values)
{
    PluginConfig c;
    c.plugin = "wget";
    c.values = std::move(values);
    return c;
}

const HookContext k_context{"/data", "/data/crawls/c1", std::filesystem::path("/data/snapshots/s1")};

} // namespace

TEST_CASE("hooks: is_secret_env_name", "[hooks][env]")
{
    for (const char* s : {"DATABASE_URL", "TEST_DATABASE_URL", "PGPASSWORD", "PGHOST", "pguser", "MY_PASSWORD_FILE",
                          "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "API_KEY", "WGET_API_KEY", "client_secret"}) {
        CHECK(is_secret_env_name(s));
    }
    for (const char* s : {"PATH", "HOME", "WGET_TIMEOUT", "KEYBOARD", "MONKEY", "DATA_DIR", "WGET_KEYS"}) {
        CHECK_FALSE(is_secret_env_name(s));
    }
}

TEST_CASE("hooks: build_hook_env passes only the allow-list - context and plugin config", "[hooks][env]")
{
    EnvMap parent = {{"PATH", "/opt/bin:/usr/bin"}, {"HOME", "/root"},         {"LANG", "C.UTF-8"},
                     {"TZ", "UTC"},                 {"DATABASE_URL", "postgres://u:p@h/db"},
                     {"PGPASSWORD", "hunter2"},     {"SHELL", "/bin/bash"},    {"LD_PRELOAD", "/evil.so"},
                     {"PLUGINS", "wget"},           {"WGET_TIMEOUT", "5"},     {"ORCH_SECRET", "s"}};
    json values = {{"timeout", 60},  {"enabled", true},      {"required", false}, {"user_agent", "UA x"},
                   {"depth", 2},       {"opts", {{"a", 1}}},   {"list", {1, "b"}},  {"nothing", nullptr}};
    EnvMap env = build_hook_env(config_with(values), k_context, parent);

    EnvMap expected = {{"PATH", "/opt/bin:/usr/bin"},
                       {"HOME", "/root"},
                       {"LANG", "C.UTF-8"},
                       {"TZ", "UTC"},
                       {"DATA_DIR", "/data"},
                       {"CRAWL_DIR", "/data/crawls/c1"},
                       {"SNAP_DIR", "/data/snapshots/s1"},
                       {"WGET_TIMEOUT", "60"},
                       {"WGET_ENABLED", "true"},
                       {"WGET_REQUIRED", "false"},
                       {"WGET_USER_AGENT", "UA x"},
                       {"WGET_DEPTH", "2"},
                       {"WGET_OPTS", R"({"a":1})"},
                       {"WGET_LIST", R"([1,"b"])"},
                       {"WGET_NOTHING", ""}};
    CHECK(env == expected);
}

TEST_CASE("hooks: build_hook_env defaults PATH and omits SNAP_DIR for crawl-level hooks", "[hooks][env]")
{
    HookContext crawl_ctx{"/data", "/data/crawls/c1", std::nullopt};
    EnvMap env = build_hook_env(config_with(json::object()), crawl_ctx, {});
    CHECK(env == EnvMap{{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"DATA_DIR", "/data"},
                        {"CRAWL_DIR", "/data/crawls/c1"}});
}

TEST_CASE("hooks: plugin config cannot set secrets or fixed variables", "[hooks][env]")
{
    PluginConfig c = config_with({{"api_key", "k"}, {"password", "p"}, {"token", "t"}, {"ok", "fine"}});
    c.plugin = "pg";  // every PG* name is a secret
    CHECK(build_hook_env(c, k_context, {}).count("PG_OK") == 0);

    c.plugin = "wget";
    EnvMap env = build_hook_env(c, k_context, {});
    CHECK(env.count("WGET_API_KEY") == 0);
    CHECK(env.count("WGET_PASSWORD") == 0);
    CHECK(env.count("WGET_TOKEN") == 0);
    CHECK(env.at("WGET_OK") == "fine");

    PluginConfig data = config_with({{"dir", "/elsewhere"}});
    data.plugin = "data";  // DATA_DIR would collide
    CHECK(build_hook_env(data, k_context, {}).at("DATA_DIR") == "/data");
    PluginConfig database = config_with({{"url", "postgres://x"}});
    database.plugin = "database";
    CHECK(build_hook_env(database, k_context, {}).count("DATABASE_URL") == 0);
}

TEST_CASE("hooks: values with NUL bytes are dropped", "[hooks][env]")
{
    EnvMap env = build_hook_env(config_with({{"bad", std::string("a\0b", 3)}}), k_context, {});
    CHECK(env.count("WGET_BAD") == 0);
}

TEST_CASE("hooks: redact_env hides secret names and URL credentials", "[hooks][env]")
{
    EnvMap env = redact_env({{"PATH", "/bin"},
                             {"DATABASE_URL", "postgres://u:p@h/db"},
                             {"PGPASSWORD", "x"},
                             {"MY_TOKEN", "x"},
                             {"WGET_PROXY", "http://user:pw@proxy:3128"},
                             {"WGET_URL", "https://example.com/a:b@c"},
                             {"NOTE", "see postgresql://admin:root@db:5432/x for details"}});
    CHECK(env.at("PATH") == "/bin");
    CHECK(env.at("DATABASE_URL") == "[redacted]");
    CHECK(env.at("PGPASSWORD") == "[redacted]");
    CHECK(env.at("MY_TOKEN") == "[redacted]");
    CHECK(env.at("WGET_PROXY") == "[redacted]");
    CHECK(env.at("WGET_URL") == "https://example.com/a:b@c");
    CHECK(env.at("NOTE") == "[redacted]");
}

TEST_CASE("hooks: to_env_strings and current_environment", "[hooks][env]")
{
    CHECK(to_env_strings({{"A", "1"}, {"B", "x=y"}}) == std::vector<std::string>{"A=1", "B=x=y"});
    ::setenv("ORCH_HOOKS_TEST_VAR", "v=1", 1);
    CHECK(current_environment().at("ORCH_HOOKS_TEST_VAR") == "v=1");
    ::unsetenv("ORCH_HOOKS_TEST_VAR");
}

TEST_CASE("hooks: build_hook_argv: interpreter - path - flags - the URL stays one argument", "[hooks][argv]")
{
    Hook snapshot_hook;
    snapshot_hook.event = "Snapshot";
    snapshot_hook.path = "/p/wget/on_Snapshot__10_wget.sh";
    snapshot_hook.interpreter = {"bash"};
    std::string url = "https://example.com/?a=1&b=$(rm -rf /);`id`|x\n'\"";
    CHECK(build_hook_argv(snapshot_hook, {url, std::string("s-1"), "c-1"}) ==
          std::vector<std::string>{"bash", "/p/wget/on_Snapshot__10_wget.sh", "--url=" + url, "--snapshot-id=s-1",
                                   "--crawl-id=c-1"});

    Hook crawl_hook;
    crawl_hook.event = "Crawl";
    crawl_hook.path = "/p/c/on_Crawl__10_x";
    CHECK(build_hook_argv(crawl_hook, {"https://e.com", std::string("s-1"), "c-1"}) ==
          std::vector<std::string>{"/p/c/on_Crawl__10_x", "--url=https://e.com", "--crawl-id=c-1"});
    crawl_hook.event = "CrawlEnd";
    CHECK(build_hook_argv(crawl_hook, {"u", std::nullopt, "c"}).size() == 3);

    CHECK_THROWS_AS(build_hook_argv(snapshot_hook, {std::string("a\0b", 3), std::nullopt, "c"}),
                    std::invalid_argument);
}

TEST_CASE("hooks: a hook built from inherited_environment() gets what it would from the whole environment",
          "[hooks][env]")
{
    ::setenv("TZ", "Europe/Paris", 1);
    ::setenv("ORCH_TEST_NOT_INHERITED", "x", 1);
    ::setenv("PGPASSWORD", "hunter2", 1);
    const auto inherited = inherited_environment();
    CHECK(inherited.at("TZ") == "Europe/Paris");
    CHECK(inherited.count("PATH") == (std::getenv("PATH") != nullptr ? 1U : 0U));
    CHECK(inherited.count("ORCH_TEST_NOT_INHERITED") == 0);
    CHECK(inherited.count("PGPASSWORD") == 0);
    const auto config = config_with(json{{"timeout", 30}});
    CHECK(build_hook_env(config, k_context, inherited) == build_hook_env(config, k_context, current_environment()));
    ::unsetenv("TZ");
    ::unsetenv("ORCH_TEST_NOT_INHERITED");
    ::unsetenv("PGPASSWORD");
    CHECK(inherited_environment().count("TZ") == 0);
}
