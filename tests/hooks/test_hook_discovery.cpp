#include "common/base/errors.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "tests/hooks/temp_tree.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace orch;
using orch::test::TempTree;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> ids(const std::vector<Hook>& hooks)
{
    std::vector<std::string> out;
    for (const auto& h : hooks) {
        out.push_back(h.id());
    }
    return out;
}

} // namespace

TEST_CASE("hooks: parse_hook_file_name splits event - step - name - background - extension", "[hooks][discovery]")
{
    auto h = parse_hook_file_name("on_Snapshot__10_wget.sh");
    REQUIRE(h);
    CHECK(h->event == "Snapshot");
    CHECK(h->step == 10);
    CHECK(h->name == "wget");
    CHECK_FALSE(h->background);
    CHECK(h->extension == "sh");

    h = parse_hook_file_name("on_Crawl__090_chrome-launch.bg.js");
    REQUIRE(h);
    CHECK(h->step == 90);
    CHECK(h->name == "chrome-launch");
    CHECK(h->background);
    CHECK(h->extension == "js");

    h = parse_hook_file_name("on_CrawlEnd__05_cleanup");
    REQUIRE(h);
    CHECK(h->extension.empty());
    CHECK_FALSE(h->background);

    h = parse_hook_file_name("on_Snapshot__05_tail.bg");
    REQUIRE(h);
    CHECK(h->background);
    CHECK(h->extension.empty());
}

TEST_CASE("hooks: parse_hook_file_name rejects names that break the pattern - with a reason", "[hooks][discovery]")
{
    for (const char* bad : {"on_Snapshot__1_x.sh", "on_Snapshot_10_x.sh", "on_Snap-shot__10_x.sh", "on___10_x.sh",
                            "on_Snapshot__10_.sh", "on_Snapshot__10x.sh", "on_Snapshot__10_a.b.sh",
                            "on_Snapshot__10_../../x.sh", "on_Snapshot__10_x.sh~", "on_Snapshot__10_x y.sh",
                            "on_Snapshot__1234567890_x.sh", "off_Snapshot__10_x.sh", "on_Snapshot__10_x."}) {
        std::string why;
        CHECK_FALSE(parse_hook_file_name(bad, &why));
        CHECK_FALSE(why.empty());
    }
}

TEST_CASE("hooks: plugin names and interpreters", "[hooks][discovery]")
{
    CHECK(is_valid_plugin_name("wget"));
    CHECK(is_valid_plugin_name("yt-dlp_2"));
    CHECK_FALSE(is_valid_plugin_name("Wget"));
    CHECK_FALSE(is_valid_plugin_name(".."));
    CHECK_FALSE(is_valid_plugin_name("a/b"));
    CHECK_FALSE(is_valid_plugin_name(""));
    CHECK(interpreter_for_extension("sh") == std::vector<std::string>{"bash"});
    CHECK(interpreter_for_extension("py") == std::vector<std::string>{"python3"});
    CHECK(interpreter_for_extension("js") == std::vector<std::string>{"node"});
    CHECK(interpreter_for_extension("rb").empty());
    CHECK(interpreter_for_extension("").empty());
}

TEST_CASE("hooks: split_plugin_dirs splits on colons and drops empty parts", "[hooks][discovery]")
{
    CHECK(split_plugin_dirs("").empty());
    CHECK(split_plugin_dirs("/a::/b/c:") == std::vector<fs::path>{"/a", "/b/c"});
}

TEST_CASE("hooks: hooks from two plugins interleave by step - then file name", "[hooks][discovery]")
{
    TempTree t;
    t.write("plugins/wget/on_Snapshot__20_wget.sh", "#!/bin/bash\n");
    t.write("plugins/wget/on_Snapshot__05_prep.py", "");
    t.write("plugins/wget/config.json", "{}");
    t.write("plugins/wget/helper.py", "");
    t.write("plugins/chrome/on_Snapshot__10_tab.bg.js", "");
    t.write("plugins/chrome/on_Snapshot__20_screenshot.js", "");
    t.write("plugins/chrome/on_Crawl__01_launch.bg.js", "");
    t.write("plugins/README.md", "not a plugin");

    HookCatalog catalog = discover_hooks(t.path() / "plugins");
    CHECK(catalog.plugins.size() == 2);
    CHECK(ids(catalog.for_event("Snapshot")) ==
          std::vector<std::string>{"wget/on_Snapshot__05_prep.py", "chrome/on_Snapshot__10_tab.bg.js",
                                   "chrome/on_Snapshot__20_screenshot.js", "wget/on_Snapshot__20_wget.sh"});
    CHECK(ids(catalog.for_event("Crawl")) == std::vector<std::string>{"chrome/on_Crawl__01_launch.bg.js"});
    CHECK(catalog.for_event("CrawlEnd").empty());

    auto tab = catalog.find("chrome/on_Snapshot__10_tab.bg.js");
    REQUIRE(tab);
    CHECK(tab->background);
    CHECK(tab->step == 10);
    CHECK(tab->interpreter == std::vector<std::string>{"node"});
    CHECK(tab->path == fs::canonical(t.path() / "plugins/chrome/on_Snapshot__10_tab.bg.js"));
    CHECK(tab->problem.empty());
}

TEST_CASE("hooks: a user plugin replaces the built-in plugin of the same name as a whole", "[hooks][discovery]")
{
    TempTree t;
    t.write("builtin/wget/on_Snapshot__10_wget.sh", "");
    t.write("builtin/wget/on_Snapshot__20_extra.sh", "");
    t.write("builtin/title/on_Snapshot__30_title.py", "");
    t.write("user1/wget/on_Snapshot__15_wget.sh", "");
    t.write("user2/wget/on_Snapshot__16_wget.sh", "");
    t.write("user2/mine/on_Snapshot__40_mine.py", "");

    HookCatalog catalog = discover_hooks(t.path() / "builtin", {t.path() / "user1", t.path() / "user2"});
    CHECK(ids(catalog.hooks) == std::vector<std::string>{"wget/on_Snapshot__15_wget.sh",
                                                         "title/on_Snapshot__30_title.py",
                                                         "mine/on_Snapshot__40_mine.py"});
    const Plugin* wget = catalog.find_plugin("wget");
    REQUIRE(wget);
    CHECK(wget->from_user_dir);
    CHECK(wget->dir == fs::canonical(t.path() / "user1/wget"));
    CHECK_FALSE(catalog.find_plugin("title")->from_user_dir);
}

TEST_CASE("hooks: entries that break the contract are skipped - not fatal", "[hooks][discovery]")
{
    TempTree t;
    t.write("outside/evil.sh", "");
    t.write("plugins/ok/on_Snapshot__10_ok.sh", "");
    t.write("plugins/ok/on_Snapshot__11_bad name.sh", "");       // space in name
    t.write("plugins/ok/on_Snapshot__12_x.sh.orig", "");         // trailing junk
    t.mkdir("plugins/ok/on_Snapshot__13_dir.sh");                // a directory
    ::mkfifo((t.path() / "plugins/ok/on_Snapshot__14_fifo.sh").c_str(), 0644);
    fs::create_symlink(t.path() / "outside/evil.sh", t.path() / "plugins/ok/on_Snapshot__15_escape.sh");
    fs::create_symlink("../../outside/evil.sh", t.path() / "plugins/ok/on_Snapshot__16_relescape.sh");
    fs::create_symlink("missing.sh", t.path() / "plugins/ok/on_Snapshot__17_dangling.sh");
    t.write("plugins/ok/real.sh", "");
    fs::create_symlink("real.sh", t.path() / "plugins/ok/on_Snapshot__18_inside.sh");
    t.write("plugins/Upper/on_Snapshot__10_x.sh", "");           // bad plugin name
    t.write("plugins/.git/on_Snapshot__10_x.sh", "");            // hidden
    fs::create_symlink(t.path() / "outside", t.path() / "plugins/linked");  // plugin dir escaping root

    HookCatalog catalog = discover_hooks(t.path() / "plugins");
    CHECK(ids(catalog.hooks) == std::vector<std::string>{"ok/on_Snapshot__10_ok.sh", "ok/on_Snapshot__18_inside.sh"});
    CHECK(catalog.find("ok/on_Snapshot__18_inside.sh")->path == fs::canonical(t.path() / "plugins/ok/real.sh"));
    CHECK(catalog.plugins.size() == 1);
}

TEST_CASE("hooks: a hook without a known extension must be executable - else it carries a problem", "[hooks][discovery]")
{
    TempTree t;
    t.write("plugins/p/on_Snapshot__10_runme", "#!/bin/sh\n", 0755);
    t.write("plugins/p/on_Snapshot__11_noexec", "#!/bin/sh\n", 0644);
    t.write("plugins/p/on_Snapshot__12_script.sh", "echo\n", 0644);  // bash runs it, no x bit needed

    HookCatalog catalog = discover_hooks(t.path() / "plugins");
    REQUIRE(catalog.hooks.size() == 3);
    CHECK(catalog.hooks[0].problem.empty());
    CHECK(catalog.hooks[0].interpreter.empty());
    CHECK_THAT(catalog.hooks[1].problem, Catch::Contains("not executable"));
    CHECK(catalog.hooks[2].problem.empty());
}

TEST_CASE("hooks: find() refuses path-traversal ids without touching the disk", "[hooks][discovery]")
{
    TempTree t;
    t.write("plugins/p/on_Snapshot__10_a.sh", "");
    HookCatalog catalog = discover_hooks(t.path() / "plugins");
    CHECK(catalog.find("p/on_Snapshot__10_a.sh"));
    for (const char* bad : {"../p/on_Snapshot__10_a.sh", "p/../p/on_Snapshot__10_a.sh", "p/on_Snapshot__10_a.sh/",
                            "/p/on_Snapshot__10_a.sh", "p", "", "p/", "P/on_Snapshot__10_a.sh",
                            "p/on_Snapshot__10_b.sh"}) {
        CHECK_FALSE(catalog.find(bad));
    }
}

TEST_CASE("hooks: an unreadable or missing plugins dir is a ConfigError naming path and errno text", "[hooks][discovery]")
{
    TempTree t;
    CHECK_THROWS_MATCHES(discover_hooks(t.path() / "nope"), ConfigError,
                         Catch::Matchers::Predicate<ConfigError>([&](const ConfigError& e) {
                             std::string m = e.what();
                             return m.find((t.path() / "nope").string()) != std::string::npos &&
                                    m.find("No such file or directory") != std::string::npos;
                         }));
    t.write("file", "");
    CHECK_THROWS_AS(discover_hooks(t.path() / "file"), ConfigError);
    t.write("plugins/p/on_Snapshot__10_a.sh", "");
    CHECK_THROWS_AS(discover_hooks(t.path() / "plugins", {t.path() / "missing_user_dir"}), ConfigError);
}

TEST_CASE("hooks: permission denied on a plugins dir or a plugin dir is a ConfigError", "[hooks][discovery]")
{
    TempTree t;
    t.write("plugins/p/on_Snapshot__10_a.sh", "");
    t.write("closed/on_Snapshot__10_a.sh", "");
    ::chmod(t.path().c_str(), 0755);
    ::chmod((t.path() / "plugins/p").c_str(), 0);
    ::chmod((t.path() / "closed").c_str(), 0);

    // Root ignores mode bits, so check from a child running as "nobody".
    auto run_as_nobody = [](auto fn) {
        pid_t pid = ::fork();
        if (pid == 0) {
            if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
                ::_exit(90);
            }
            try {
                fn();
            } catch (const ConfigError& e) {
                std::string m = e.what();
                ::_exit(m.find("Permission denied") != std::string::npos ? 0 : 91);
            } catch (...) {
                ::_exit(92);
            }
            ::_exit(93);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    CHECK(run_as_nobody([&] { discover_hooks(t.path() / "plugins"); }) == 0);
    CHECK(run_as_nobody([&] { discover_hooks(t.path() / "closed"); }) == 0);
}

TEST_CASE("hooks: the repository's own plugins are discovered cleanly", "[hooks][discovery]")
{
    // Never skip: the source tree is always known (tests/support/test_main.cpp).
    const char* src = std::getenv("ORCH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    HookCatalog catalog = discover_hooks(fs::path(src) / "plugins");
    CHECK_FALSE(catalog.for_event("Snapshot").empty());
    for (const auto& hook : catalog.hooks) {
        INFO(hook.id());
        CHECK(hook.problem.empty());
        CHECK_FALSE(hook.interpreter.empty());
    }
}
