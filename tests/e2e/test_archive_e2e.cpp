// End to end with the real plugin set: a local site on 127.0.0.1, the real
// orchestrator, workers, hooks, headless Chromium and PostgreSQL.
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace orch::test;
namespace fs = std::filesystem;

namespace {

int free_port()
{
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(s);
    return ntohs(addr.sin_port);
}

bool port_answers(int port)
{
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(s);
    return ok;
}

// The bundled demo site (5 linked pages), served by python's http.server.
struct DemoSite {
    int port = free_port();
    SpawnedProcess server{{"/usr/bin/env", "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                           (source_dir() / "scripts" / "demo_site").string(), std::to_string(port)}};
    DemoSite() { REQUIRE(eventually([&] { return port_answers(port); }, std::chrono::seconds(10))); }
    std::string url(const std::string& page) const { return "http://127.0.0.1:" + std::to_string(port) + "/" + page; }
};

// A server that accepts connections and never answers.
struct StallServer {
    int port = free_port();
    SpawnedProcess server{{"/usr/bin/env", "python3", "-c",
                           "import socket,time\n"
                           "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                           "s.bind(('127.0.0.1'," + std::to_string(port) + ")); s.listen(64)\n"
                           "held=[]\n"
                           "while True:\n"
                           "    c,_=s.accept(); held.append(c)\n"}};
    StallServer() { REQUIRE(eventually([&] { return port_answers(port); }, std::chrono::seconds(10))); }
};

// Processes whose command line or environment mentions `needle`, from /proc.
int processes_mentioning(const std::string& needle)
{
    int count = 0;
    DIR* proc = ::opendir("/proc");
    while (auto* e = ::readdir(proc)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || std::to_string(::getpid()) == e->d_name) {
            continue;
        }
        for (const char* file : {"/cmdline", "/environ"}) {
            std::ifstream in(std::string("/proc/") + e->d_name + file);
            std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (text.find(needle) != std::string::npos) {
                ++count;
                break;
            }
        }
    }
    ::closedir(proc);
    return count;
}

std::string read_prefix(const fs::path& path, std::size_t n)
{
    std::ifstream in(path, std::ios::binary);
    std::string s(n, '\0');
    in.read(s.data(), static_cast<std::streamsize>(n));
    s.resize(static_cast<std::size_t>(in.gcount()));
    return s;
}

struct Run {
    ScratchDatabase db;
    ScratchDir data{"orch-e2e-"};

    std::string add(const std::vector<std::string>& urls, int depth)
    {
        std::vector<std::string> argv{bin_path("orchestrator").string(), "add", "--depth", std::to_string(depth),
                                      "--database-url", db.url(), "--data-dir", data.path().string()};
        argv.insert(argv.end(), urls.begin(), urls.end());
        auto r = run_command(argv);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return r.out.substr(0, r.out.find('\n'));
    }

    CommandResult orchestrate(std::map<std::string, std::string> env = {})
    {
        env.emplace("ORCH_BUILTIN_PLUGINS_DIR", (source_dir() / "plugins").string());
        env.emplace("TEARDOWN_GRACE", "5");
        return run_command({bin_path("orchestrator").string(), "--database-url", db.url(), "--data-dir",
                            data.path().string(), "--log-level", "warn"},
                           env);
    }
};


// The counting two-host site of tests/support/archive_site.py: pages that load
// content by fetch() and XHR, requisites from a second loopback host, a redirect
// and a link added by script.
struct ArchiveSite {
    ScratchDir dir{"orch-site-"};
    std::optional<SpawnedProcess> server;
    std::string main;
    std::string requisite;

    ArchiveSite()
    {
        const auto ready = dir.path() / "ready.json";
        server.emplace(std::vector<std::string>{"/usr/bin/env", "python3",
                                                (source_dir() / "tests" / "support" / "archive_site.py").string(),
                                                "--ready-file", ready.string()});
        REQUIRE(eventually([&] { return fs::exists(ready); }, std::chrono::seconds(15)));
        auto j = nlohmann::json::parse(read_prefix(ready, 4096));
        main = j["main"].get<std::string>();
        requisite = j["requisite"].get<std::string>();
    }
    void stop()
    {
        server->signal(SIGTERM);
        REQUIRE(server->wait_for(std::chrono::seconds(10)));
    }
    // Requests per path on the main host since start.
    nlohmann::json main_counts() const
    {
        auto r = run_command({"/usr/bin/env", "python3", "-c",
                              "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                              main + "/__counts"});
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out)["main"];
    }
};

fs::path test_tools()
{
    const char* from_env = std::getenv("ORCH_TEST_TOOLS");
    return from_env && *from_env ? fs::path(from_env) : fs::path(ORCH_TEST_TOOLS_BUILD_DIR);
}
} // namespace

TEST_CASE("e2e: a depth-1 crawl of a 5-page local site archives every page with one browser visit", "[e2e]")
{
    DemoSite site;
    Run run;
    auto crawl = run.add({site.url("index.html")}, 1);
    auto r = run.orchestrate();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);

    auto conn = run.db.connect();
    pqxx::read_transaction tx(*conn);
    auto c = tx.exec_params1("SELECT status, outcome FROM crawl WHERE id = $1", crawl);
    CHECK(c[0].as<std::string>() == "sealed");
    CHECK(c[1].as<std::string>() == "succeeded");
    auto snapshots = tx.exec_params("SELECT id, url, title, outcome FROM snapshot WHERE crawl_id = $1", crawl);
    REQUIRE(snapshots.size() == 5);
    for (const auto& s : snapshots) {
        auto id = s[0].as<std::string>();
        INFO(s[1].as<std::string>());
        CHECK(s[3].as<std::string>() == "succeeded");
        CHECK_FALSE(s[2].is_null());
        auto results = tx.exec_params("SELECT plugin, status, output_files::text, output_size, coalesce(error, '') "
                                      "FROM archive_result WHERE snapshot_id = $1",
                                      id);
        std::set<std::string> plugins;
        bool visit_warc = false;
        for (const auto& ar : results) {
            INFO(ar[0].as<std::string>() << ": " << ar[4].as<std::string>());
            if (ar[0].as<std::string>() == "html") {
                // The crawl has a browser: the non-browser capture stands aside.
                CHECK(ar[1].as<std::string>() == "skipped");
                continue;
            }
            CHECK(ar[1].as<std::string>() == "succeeded");
            CHECK(ar[3].as<long>() > 0);
            auto files = nlohmann::json::parse(ar[2].as<std::string>());
            CHECK_FALSE(files.empty());
            // Each listed file is there, with the size recorded for it.
            const auto plugin_dir = run.data / "snapshots" / id / ar[0].as<std::string>();
            for (const auto& f : files) {
                const auto file = plugin_dir / f["path"].get<std::string>();
                INFO(file);
                REQUIRE(std::filesystem::is_regular_file(file));
                CHECK(f["size"].get<std::uintmax_t>() == std::filesystem::file_size(file));
                const auto name = f["path"].get<std::string>();
                if (name == "warc/" + id + "-00000.warc.gz") {
                    visit_warc = read_prefix(file, 2) == "\x1f\x8b";
                }
            }
            plugins.insert(ar[0].as<std::string>());
        }
        CHECK(plugins == std::set<std::string>{"visit"});
        CHECK(visit_warc);
        auto dir = run.data / "snapshots" / id / "visit";
        CHECK(read_prefix(dir / "screenshot.png", 8) == std::string("\x89PNG\r\n\x1a\n", 8));
        CHECK(read_prefix(dir / "output.pdf", 5) == "%PDF-");
        CHECK(read_prefix(dir / "dom.html", 15) == "<!DOCTYPE html>");
    }
    // The crawl-wide browser ran and is gone, crashpad handler included: checked from the OS.
    auto chrome = tx.exec_params("SELECT status, end_reason FROM process WHERE crawl_id = $1 AND plugin = 'chrome'",
                                 crawl);
    REQUIRE(chrome.size() == 1);
    CHECK(chrome[0][0].as<std::string>() == "exited");
    CHECK(processes_mentioning(run.data.path().string()) == 0);
}

TEST_CASE("e2e: without Chromium the visit reports skipped and wget captures the page", "[e2e]")
{
    DemoSite site;
    Run run;
    auto crawl = run.add({site.url("about.html")}, 0);
    auto r = run.orchestrate({{"CHROME_BINARY", "/nonexistent/chromium"}, {"VISIT_CHROME_BINARY",
                              "/nonexistent/chromium"}});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto conn = run.db.connect();
    pqxx::read_transaction tx(*conn);
    auto results = tx.exec_params("SELECT ar.plugin, ar.status, coalesce(ar.error, ar.output_str, '') "
                                  "FROM archive_result ar JOIN snapshot s ON s.id = ar.snapshot_id "
                                  "WHERE s.crawl_id = $1",
                                  crawl);
    REQUIRE(results.size() == 2); // visit, html
    for (const auto& ar : results) {
        auto plugin = ar[0].as<std::string>();
        INFO(plugin << ": " << ar[2].as<std::string>());
        if (plugin == "visit") {
            CHECK(ar[1].as<std::string>() == "skipped");
            CHECK_FALSE(ar[2].as<std::string>().empty());
        } else {
            CHECK(ar[1].as<std::string>() == "succeeded");
        }
    }
    CHECK(tx.exec_params1("SELECT status FROM crawl WHERE id = $1", crawl)[0].as<std::string>() == "sealed");
    CHECK(processes_mentioning(run.data.path().string()) == 0);
}

TEST_CASE("e2e: a page that never finishes loading times out within the plugin timeout - the crawl completes",
          "[e2e]")
{
    StallServer stall;
    Run run;
    auto url = "http://127.0.0.1:" + std::to_string(stall.port) + "/slow.html";
    auto crawl = run.add({url}, 0);
    std::map<std::string, std::string> env;
    for (const char* p : {"HTML", "VISIT"}) {
        env[std::string(p) + "_TIMEOUT"] = "5";
    }
    env["HTML_ONLY_WITHOUT_BROWSER"] = "false"; // both captures face the stalled page
    auto started = std::chrono::steady_clock::now();
    auto r = run.orchestrate(env);
    auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // Two hooks of 5 s each run one after another, plus the browser's start: well under a minute.
    CHECK(elapsed < 90);
    auto conn = run.db.connect();
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec_params1("SELECT status FROM crawl WHERE id = $1", crawl)[0].as<std::string>() == "sealed");
    auto results = tx.exec_params("SELECT ar.plugin, ar.status, coalesce(ar.error, ''), "
                                  " extract(epoch FROM ar.end_ts - ar.start_ts) "
                                  "FROM archive_result ar JOIN snapshot s ON s.id = ar.snapshot_id "
                                  "WHERE s.crawl_id = $1",
                                  crawl);
    REQUIRE(results.size() == 2);
    for (const auto& ar : results) {
        INFO(ar[0].as<std::string>() << ": " << ar[2].as<std::string>());
        CHECK(ar[1].as<std::string>() == "failed");
        CHECK(ar[2].as<std::string>().find("timed out") != std::string::npos);
        CHECK(ar[3].as<double>() < 5 + 10 + 3); // timeout + teardown grace + slack
    }
    CHECK(processes_mentioning(run.data.path().string()) == 0);
}

TEST_CASE("e2e: a crawl's WACZ holds every response of one visit per page and replays offline", "[e2e][wacz]")
{
    ArchiveSite site;
    Run run;
    auto crawl = run.add({site.main + "/"}, 1);
    auto r = run.orchestrate();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    {
        auto conn = run.db.connect();
        pqxx::read_transaction tx(*conn);
        CHECK(tx.exec_params1("SELECT outcome FROM crawl WHERE id = $1", crawl)[0].as<std::string>() == "succeeded");
        // The link that only the page's script adds was followed.
        CHECK(tx.exec_params1("SELECT count(*) FROM snapshot WHERE crawl_id = $1 AND url = $2", crawl,
                              site.main + "/added-by-script.html")[0].as<int>() == 1);
        CHECK(tx.exec_params1("SELECT count(*) FROM snapshot WHERE crawl_id = $1 AND outcome <> 'succeeded'",
                              crawl)[0].as<int>() == 0);
    }
    // One browser visit per page: the server saw each page URL once (the
    // redirect's target through the redirect).
    auto counts = site.main_counts();
    INFO(counts.dump());
    for (const char* page : {"/", "/about.html", "/old", "/new.html", "/big.html", "/added-by-script.html"}) {
        INFO(page);
        CHECK(counts.value(page, 0) == 1);
    }

    const auto wacz = run.data.path() / "crawl.wacz";
    auto exported = run_command({bin_path("orchestrator").string(), "export", crawl, "--wacz", wacz.string(),
                                 "--database-url", run.db.url(), "--data-dir", run.data.path().string()});
    INFO(exported.err);
    REQUIRE(exported.exit_code == 0);

    // Judged by the independent checker (structure, digests, warcio.js on every WARC).
    const std::map<std::string, std::string> tools_env{{"ORCH_TEST_TOOLS", test_tools().string()}};
    auto checked = run_command({"/usr/bin/env", "python3",
                                (source_dir() / "tests" / "archive_tools" / "check_wacz.py").string(), "--json",
                                wacz.string()},
                               tools_env);
    INFO(checked.out << checked.err);
    REQUIRE(checked.exit_code == 0);
    auto summary = nlohmann::json::parse(checked.out);
    std::map<std::string, std::string> status_of;
    std::map<std::string, long> bytes_of;
    for (const auto& resp : summary["responses"]) {
        status_of[resp["uri"].get<std::string>()] = resp["status"].get<std::string>();
        bytes_of[resp["uri"].get<std::string>()] = resp["bytes"].get<long>();
    }
    for (const auto& [uri, status] : std::map<std::string, std::string>{
             {site.main + "/", "200"},
             {site.main + "/data.json", "200"},
             {site.main + "/xhr.txt", "200"},
             {site.requisite + "/style.css", "200"},
             {site.requisite + "/font.woff2", "200"},
             {site.requisite + "/pixel.png", "200"},
             {site.main + "/old", "301"},
             {site.main + "/new.html", "200"},
             {site.main + "/added-by-script.html", "200"}}) {
        INFO(uri);
        REQUIRE(status_of.count(uri) == 1);
        CHECK(status_of[uri] == status);
        if (status == "200") {
            CHECK(bytes_of[uri] > 0);
        }
    }
    CHECK(summary["payload_digests_verified"].get<int>() >= static_cast<int>(summary["responses"].size()) - 1);

    // Replayed in ReplayWeb.page with the original site gone.
    site.stop();
    auto replayed = run_command({"/usr/bin/env", "python3",
                                 (source_dir() / "tests" / "archive_tools" / "replay_wacz.py").string(), "--wacz",
                                 wacz.string(), "--url", site.main + "/", "--expect-title", "Archive Site Index",
                                 "--expect-text", "fetched-by-fetch", "--expect-text", "loaded-by-xhr"},
                                tools_env);
    INFO(replayed.out << replayed.err);
    CHECK(replayed.exit_code == 0);
    CHECK(processes_mentioning(run.data.path().string()) == 0);
}
