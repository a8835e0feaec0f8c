// Security: secrets never reach hooks or the process table, URLs reach hooks as
// one untouched argument, and recorded output paths never leave the data directory.
#include "tests/security/security_fixture.hpp"
#include "tests/support/spawned_process.hpp"

#include "tests/chaos/db_query.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace orch::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_secret = "Sup3rS3cretPw-7f3a";

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The scratch database as a URI carrying a password (the test server trusts
// local connections, so any password is accepted and none is needed).
std::string uri_with_password(const SecurityFixture& f)
{
    auto host = f.scalar("SELECT current_setting('unix_socket_directories')");
    host = host.substr(0, host.find(','));
    auto user = f.scalar("SELECT current_user");
    auto port = f.scalar("SELECT current_setting('port')");
    std::string enc;
    for (char c : host) {
        enc += c == '/' ? std::string("%2F") : std::string(1, c);
    }
    return "postgresql://" + user + ":" + k_secret + "@/" + f.db.name() + "?host=" + enc + "&port=" + port;
}

} // namespace

TEST_CASE("hooks never see the database URL or its password - the process table never holds it",
          "[security][secrets]")
{
    SecurityFixture f;
    auto url = uri_with_password(f);
    REQUIRE(orch::chaos::scalar(url, "SELECT 1") == "1");
    auto dump = "cat /proc/self/environ > \"" + f.out.string() + "/env.$$\"\n" +
                "cat /proc/$$/cmdline > \"" + f.out.string() + "/cmdline.$$\"\n" +
                "printf '%s\\0' \"$@\" > \"" + f.out.string() + "/args.$$\"\n" +
                "sleep 1.5\necho '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'\n";
    f.write_hook("spy", "on_Crawl__10_spy.sh", dump);
    f.write_hook("spy", "on_Snapshot__10_spy.sh", dump);
    f.add_crawl({"http://secret.test/1", "http://secret.test/2"});

    // Through the real orchestrator, the secret in its URL and in PGPASSWORD.
    std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", url, "--data-dir",
                                     f.data.string(), "--idle-window", "0"};
    EnvChanges env;
    for (const auto& [k, v] : f.env({{"PGPASSWORD", k_secret}, {"API_TOKEN", k_secret}})) {
        env[k] = v.empty() ? std::nullopt : std::optional<std::string>(v);
    }
    SpawnedProcess orch(argv, env);
    // While hooks run, read their environment and command line from outside.
    int seen_hooks = 0;
    std::vector<std::string> leaks;
    bool done = eventually(
        [&] {
            for (const auto& row : orch::chaos::query(url, "SELECT pid, process_type FROM process WHERE status = "
                                                           "'running' AND process_type IN ('hook', 'worker')")) {
                auto proc = fs::path("/proc") / row[0];
                // Workers get the database URL through their environment (mode 0400 in /proc, by
                // design); their command line is world-readable and must not carry it. Hooks get neither.
                for (const auto& file : {"environ", "cmdline"}) {
                    if (row[1] == "worker" && std::string(file) == "environ") {
                        continue;
                    }
                    auto text = slurp(proc / file);
                    if (text.find(k_secret) != std::string::npos) {
                        leaks.push_back(row[1] + " " + row[0] + " " + file);
                    }
                    if (row[1] == "worker" && std::string(file) == "cmdline" &&
                        text.find(f.db.name()) != std::string::npos) {
                        leaks.push_back("worker " + row[0] + " has the database URL on its command line");
                    }
                }
                seen_hooks += row[1] == "hook" ? 1 : 0;
            }
            return orch.wait_for(std::chrono::milliseconds(100));
        },
        std::chrono::seconds(90));
    INFO(orch.err().substr(0, 4000));
    REQUIRE(done);
    CHECK(orch.exit_code() == 0);
    CHECK(seen_hooks > 0);
    for (const auto& l : leaks) {
        UNSCOPED_INFO("leak: " << l);
    }
    CHECK(leaks.empty());

    int dumps = 0;
    for (const auto& entry : fs::directory_iterator(f.out)) {
        auto text = slurp(entry.path());
        INFO(entry.path().filename().string());
        CHECK(text.find(k_secret) == std::string::npos);
        CHECK(text.find(f.db.name()) == std::string::npos);
        CHECK(text.find("DATABASE_URL") == std::string::npos);
        CHECK(text.find("PGPASSWORD") == std::string::npos);
        CHECK(text.find("API_TOKEN") == std::string::npos);
        dumps += 1;
    }
    CHECK(dumps == 9);  // (1 crawl hook + 2 snapshot hooks) x env, cmdline, args

    // Nothing the system wrote down holds the secret: rows, logs, cmd.sh files.
    CHECK(orch::chaos::scalar(url, std::string("SELECT string_agg(process_type || ' ' || coalesce(worker_type, '') "
                                       "|| ' ' || cmd::text, '; ') FROM process WHERE env::text LIKE '%") + k_secret +
                                       "%' OR cmd::text LIKE '%" + k_secret + "%' OR coalesce(stdout_tail, '') || "
                                       "coalesce(stderr_tail, '') LIKE '%" + k_secret + "%'") == "");
    CHECK(orch::chaos::scalar(url, "SELECT count(*) FROM process") != "0");
    for (const auto& entry : fs::recursive_directory_iterator(f.data)) {
        if (entry.is_regular_file()) {
            INFO(entry.path().string());
            CHECK(slurp(entry.path()).find(k_secret) == std::string::npos);
        }
    }
}

TEST_CASE("a URL with shell metacharacters reaches the hook as one untouched argument", "[security][argv]")
{
    SecurityFixture f;
    const std::string url = "http://meta.test/a;b|c&d$(touch${IFS}/tmp/pwned)`id`?q='x'\"y\"&r=$HOME*\\z#frag";
    f.write_hook("argv", "on_Snapshot__10_argv.sh",
                 "printf '%s\\0' \"$@\" > \"" + f.out.string() + "/args\"\n"
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'");
    auto crawl = f.add_crawl({url});
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    INFO(r.err.substr(0, 3000));
    REQUIRE(r.exit_code == 0);
    auto args = slurp(f.out / "args");
    std::vector<std::string> parts;
    std::istringstream in(args);
    for (std::string a; std::getline(in, a, '\0');) {
        parts.push_back(a);
    }
    REQUIRE(parts.size() == 3);
    // Normalisation drops the fragment and percent-encodes what RFC 3986 never
    // allows in a path or query (| ` " \ { }), as browsers send them; the shell
    // metacharacters it allows (; & $ ( ) * ') stay as they are.
    auto stored = f.scalar("SELECT url FROM snapshot");
    CHECK(stored == "http://meta.test/a;b%7Cc&d$(touch$%7BIFS%7D/tmp/pwned)%60id%60?q='x'%22y%22&r=$HOME*%5Cz");
    CHECK(parts[0] == "--url=" + stored);
    CHECK_FALSE(fs::exists("/tmp/pwned"));
}

TEST_CASE("three spellings of an internationalised host become one snapshot of one host", "[security][url_host]")
{
    // As an auditor found it: BÜCHER, bücher and the punycode form were three
    // seeds (three fetches of one page) and three hosts for the per-host rules.
    SecurityFixture f;
    f.write_hook("urls", "on_Snapshot__10_urls.sh",
                 "printf '%s\\n' \"$1\" >> \"" + f.out.string() + "/urls\"\n"
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'");
    auto crawl = f.add_crawl({"http://B\xc3\x9c" "CHER.example/", "http://b\xc3\xbc" "cher.example/",
                              "http://xn--bcher-kva.example/"});
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    INFO(r.err.substr(0, 3000));
    REQUIRE(r.exit_code == 0);
    CHECK(f.scalar("SELECT string_agg(url || ' ' || url_host(url), ',') FROM snapshot") ==
          "http://xn--bcher-kva.example/ xn--bcher-kva.example");
    CHECK(slurp(f.out / "urls") == "--url=http://xn--bcher-kva.example/\n");
}

TEST_CASE("recorded output paths never leave the hook's directory", "[security][paths]")
{
    SecurityFixture f;
    auto outside = f.root / "outside-secret.txt";
    std::ofstream(outside) << std::string(5000, 's');
    f.write_hook("writer", "on_Snapshot__10_writer.sh",
                 "echo inside > inside.txt\nmkdir -p sub && echo deep > sub/deep.txt\n"
                 "echo escape > ../../escape.txt 2>/dev/null\necho up > ../up.txt\n"
                 "ln -s '" + outside.string() + "' link-out.txt\nln -s /etc link-dir\n"
                 "ln -s .. parent-link\n"
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"../../../etc/passwd\"}'");
    auto crawl = f.add_crawl({"http://paths.test/"});
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    INFO(r.err.substr(0, 3000));
    REQUIRE(r.exit_code == 0);
    auto snap = f.scalar("SELECT id FROM snapshot");
    // The directories derive from ids only.
    CHECK(fs::is_directory(f.data / "snapshots" / snap / "writer"));
    CHECK(fs::is_directory(f.data / "crawls" / crawl));
    auto files = nlohmann::json::parse(f.scalar("SELECT output_files FROM archive_result"));
    std::vector<std::string> paths;
    for (const auto& e : files) {
        paths.push_back(e.at("path").get<std::string>());
    }
    std::sort(paths.begin(), paths.end());
    CHECK(paths == std::vector<std::string>{"inside.txt", "sub/deep.txt"});
    for (const auto& p : paths) {
        CHECK(p.front() != '/');
        CHECK(p.find("..") == std::string::npos);
        auto resolved = fs::weakly_canonical(f.data / "snapshots" / snap / "writer" / p);
        CHECK(resolved.string().rfind((f.data / "snapshots" / snap / "writer").string(), 0) == 0);
    }
    CHECK(f.scalar("SELECT output_size FROM archive_result") == "12");  // inside.txt (7) + sub/deep.txt (5), no symlink target
}
