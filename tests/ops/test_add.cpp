#include "common/url/url.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace orch::test;

namespace {

CommandResult add(const ScratchDatabase& db, std::vector<std::string> args, const std::string& input = {})
{
    std::vector<std::string> argv{bin_path("orchestrator").string(), "add"};
    argv.insert(argv.end(), args.begin(), args.end());
    ScratchDir data("orch-add-");
    argv.insert(argv.end(), {"--database-url", db.url(), "--data-dir", data.path().string()});
    return run_command(argv, {}, input);
}

long crawl_count(const ScratchDatabase& db)
{
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    return tx.exec1("SELECT count(*) FROM crawl")[0].as<long>();
}

} // namespace

TEST_CASE("orchestrator add stores good URLs - normalised - and prints the crawl id", "[add]")
{
    ScratchDatabase db;
    auto r = add(db, {"http://Example.com", "https://example.com:443/a#frag", "--depth", "2", "--label", "news",
                      "--tag", "t1", "--tag", "t2"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto id = r.out.substr(0, r.out.find('\n'));
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    auto row = tx.exec_params1("SELECT array_to_json(urls)::text, max_depth, label, array_to_json(tags)::text, "
                               "status FROM crawl WHERE id = $1",
                               id);
    CHECK(row[0].as<std::string>() == R"(["http://example.com/","https://example.com/a"])");
    CHECK(row[1].as<int>() == 2);
    CHECK(row[2].as<std::string>() == "news");
    CHECK(row[3].as<std::string>() == R"(["t1","t2"])");
    CHECK(row[4].as<std::string>() == "queued");
}

TEST_CASE("orchestrator add --id is idempotent - the same crawl again adds nothing - another crawl under it is "
          "refused with code 7",
          "[add]")
{
    ScratchDatabase db;
    const std::string id = "0b5e3c52-6f1d-4c7e-9a3b-2d8f4e6a1c90";
    const std::vector<std::string> crawl{"https://example.com/a", "--depth", "1", "--tag", "t", "--config",
                                         R"({"URL_DENYLIST": "x"})", "--id", "0B5E3C52-6F1D-4C7E-9A3B-2D8F4E6A1C90"};
    auto first = add(db, crawl);
    INFO(first.err);
    REQUIRE(first.exit_code == 0);
    CHECK(first.out == id + "\n");
    // A script that did not hear the answer runs it again.
    auto again = add(db, crawl);
    INFO(again.err);
    CHECK(again.exit_code == 0);
    CHECK(again.out == id + "\n");
    CHECK(again.err.find("exists already with these URLs and settings") != std::string::npos);
    CHECK(crawl_count(db) == 1);
    {
        auto conn = db.connect();
        pqxx::read_transaction tx(*conn);
        CHECK(tx.exec_params1("SELECT count(*) FROM event WHERE kind = 'crawl.added' AND crawl_id = $1", id)[0]
                  .as<long>() == 1);
    }
    // The same id for another crawl: each setting counts.
    for (const auto& other : std::vector<std::vector<std::string>>{
             {"https://example.com/b", "--depth", "1", "--tag", "t", "--config", R"({"URL_DENYLIST": "x"})"},
             {"https://example.com/a", "--depth", "2", "--tag", "t", "--config", R"({"URL_DENYLIST": "x"})"},
             {"https://example.com/a", "--depth", "1", "--config", R"({"URL_DENYLIST": "x"})"},
             {"https://example.com/a", "--depth", "1", "--tag", "t"},
             {"https://example.com/a", "--depth", "1", "--tag", "t", "--config", R"({"URL_DENYLIST": "x"})",
              "--max-per-host", "2"}}) {
        auto args = other;
        args.insert(args.end(), {"--id", id});
        auto r = add(db, args);
        INFO(r.err);
        CHECK(r.exit_code == 7);
        CHECK(r.err.find("exists already with other URLs or settings") != std::string::npos);
    }
    CHECK(crawl_count(db) == 1);
    auto malformed = add(db, {"https://example.com/a", "--id", "not-a-uuid"});
    CHECK(malformed.exit_code == 7);
    CHECK(malformed.err.find("not a valid id") != std::string::npos);
    CHECK(crawl_count(db) == 1);
}

TEST_CASE("orchestrator add stores the three spellings of an internationalised host as one URL", "[add][url_host]")
{
    ScratchDatabase db;
    auto r = add(db, {"http://B\xc3\x9c" "CHER.example/", "http://b\xc3\xbc" "cher.example/",
                      "http://xn--bcher-kva.example/"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT array_to_json(urls)::text FROM crawl")[0].as<std::string>() ==
          R"(["http://xn--bcher-kva.example/"])");
}

TEST_CASE("the database's url_host reads back from a stored URL the host check_url gave it", "[add][url_host]")
{
    // The per-host rules group snapshots by url_host(url) (migrations/0016):
    // it must fold no two spellings check_url keeps apart and split none it folds.
    ScratchDatabase db;
    const std::vector<std::string> inputs{"http://u:p@B\xc3\x9c" "CHER.example:8080/a/../b",
                                          "http://[2001:DB8:0::1]:8080/x",
                                          "https://Example.COM./",
                                          "http://1.2.3.4/",
                                          "http://_srv.Example.com/?q=a@b:c"};
    auto r = add(db, inputs);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    auto rows = tx.exec("SELECT u, url_host(u) FROM crawl, unnest(urls) WITH ORDINALITY AS x(u, n) ORDER BY n");
    REQUIRE(rows.size() == inputs.size());
    std::vector<std::string> hosts;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto check = orch::check_url(inputs[i]);
        REQUIRE(check.valid);
        CHECK(rows[i][0].as<std::string>() == check.valid->url);
        CHECK(rows[i][1].as<std::string>() == check.valid->host);
        hosts.push_back(check.valid->host);
    }
    CHECK(hosts == std::vector<std::string>{"xn--bcher-kva.example", "[2001:db8::1]", "example.com", "1.2.3.4",
                                            "_srv.example.com"});
}

TEST_CASE("orchestrator add reads URLs from a file and from stdin - skipping comments", "[add]")
{
    ScratchDatabase db;
    ScratchDir dir("orch-urls-");
    auto file = dir / "urls.txt";
    std::ofstream(file) << "# a comment\nhttp://a.test/1\n\n  http://a.test/2  \n";
    auto r = add(db, {"--urls-file", file.string()});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    auto r2 = add(db, {"--urls-file", "-"}, "http://b.test/\n#x\nhttps://b.test/2\n");
    INFO(r2.err);
    CHECK(r2.exit_code == 0);
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    CHECK(tx.exec1("SELECT sum(cardinality(urls)) FROM crawl")[0].as<long>() == 4);
}

TEST_CASE("orchestrator add rejects bad input with a clear message - code 7 - and stores nothing", "[add]")
{
    ScratchDatabase db;
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    std::vector<Case> cases{
        {{"ftp://x"}, "unsupported scheme 'ftp'"},
        {{"http://"}, "no host"},
        {{"not a url"}, "'not a url'"},
        {{"javascript:alert(1)"}, "unsupported scheme 'javascript'"},
        {{"file:///etc/passwd"}, "unsupported scheme 'file'"},
        {{"http://a.test/\nhttp://b.test/"}, "control characters"},
        {{"http://a.test/" + std::string(9000, 'x')}, "longer than"},
        {{"http://ok.test/", "ftp://x"}, "nothing was added"},
        {{"http://999.1.1.1/"}, "not an IPv4 address"},
        {{"http://a..b/"}, "empty label"},
        {{"http://ex%61mple.test/"}, "percent-encoded hosts are not accepted"},
        {{"http://\xe2\x98\x83.example/"}, "not a valid internationalised domain name"},
        {{}, "no URLs given"},
        {{"--urls-file", "/nonexistent/urls.txt"}, "cannot read URLs file /nonexistent/urls.txt"},
    };
    for (const auto& c : cases) {
        auto r = add(db, c.args);
        INFO((c.args.empty() ? std::string("(none)") : c.args.front()) << " -> " << r.err);
        CHECK(r.exit_code == 7);
        CHECK(r.err.find(c.message) != std::string::npos);
        CHECK(r.err.find("orchestrator: error:") == 0);
    }
    CHECK(crawl_count(db) == 0);
}

TEST_CASE("orchestrator add refuses a crawl config its workers would refuse - code 7 - and stores nothing", "[add]")
{
    ScratchDatabase db;
    ScratchDir dir("orch-add-config-");
    auto plugin = dir / "plugins" / "grab";
    std::filesystem::create_directories(plugin);
    std::ofstream(plugin / "on_Snapshot__10_grab.sh") << "#!/bin/sh\nexit 0\n";
    std::filesystem::permissions(plugin / "on_Snapshot__10_grab.sh", std::filesystem::perms::owner_all);
    std::ofstream(plugin / "config.json") << R"({"timeout": 5, "depth": 2})";
    const std::string plugins = (dir / "plugins").string();
    // Each of these used to be stored, then refused by every crawl worker (exit 3),
    // which a daemon retries for ever.
    const std::vector<std::pair<std::string, std::string>> cases{
        {R"({"url_allow": "("})", "url_allow"},
        {R"({"url_deny": ["ok", "[z-a]"]})", "url_deny"},
        {R"({"plugins": {"grab": {"timeout": "soon"}}})", "plugins.grab.timeout"},
        {R"({"GRAB_TIMEOUT": "soon"})", "GRAB_TIMEOUT"},
        {R"({"plugins": {"visit": {"enabled": "maybe"}}})", "plugins.visit.enabled"},
    };
    for (const auto& [config, message] : cases) {
        auto r = add(db, {"http://a.test/", "--config", config, "--plugins-dir", plugins});
        INFO(config << " -> " << r.err);
        CHECK(r.exit_code == 7);
        CHECK(r.err.find(message) != std::string::npos);
    }
    CHECK(crawl_count(db) == 0);
    auto ok = add(db, {"http://a.test/", "--config", R"({"plugins": {"grab": {"timeout": 9}}, "url_allow": "a\\.test"})",
                       "--plugins-dir", plugins});
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
    CHECK(crawl_count(db) == 1);
}

TEST_CASE("usage errors exit 2 - --help and --version exit 0 - on all three executables", "[cli]")
{
    for (const char* exe : {"orchestrator", "crawl_worker", "snapshot_worker"}) {
        INFO(exe);
        auto help = run_command({bin_path(exe).string(), "--help"});
        CHECK(help.exit_code == 0);
        CHECK(help.out.find("Usage") != std::string::npos);
        auto version = run_command({bin_path(exe).string(), "--version"});
        CHECK(version.exit_code == 0);
        CHECK(version.out.find(exe) != std::string::npos);
        auto bad = run_command({bin_path(exe).string(), "--no-such-flag"});
        CHECK(bad.exit_code == 2);
    }
    auto depth = run_command({bin_path("orchestrator").string(), "add", "--depth", "-1", "http://a.test/"});
    CHECK(depth.exit_code == 2);
}

TEST_CASE("an unreachable database gives code 4 and names the problem", "[cli]")
{
    ScratchDir add_data("orch-unreach-");
    auto r = run_command({bin_path("orchestrator").string(), "add", "http://a.test/", "--database-url",
                          "host=/nonexistent/socket/dir dbname=x connect_timeout=2", "--data-dir",
                          add_data.path().string()});
    CHECK(r.exit_code == 4);
    CHECK(r.err.find("cannot connect to PostgreSQL") != std::string::npos);
    ScratchDir worker_data("orch-unreach-");
    auto w = run_command({bin_path("snapshot_worker").string(), "--snapshot-id",
                          "00000000-0000-4000-8000-000000000000", "--database-url", "postgresql://nobody@127.0.0.1:1/x",
                          "--data-dir", worker_data.path().string()});
    CHECK(w.exit_code == 4);
}

TEST_CASE("workers: malformed ids exit 7 - unknown ids exit 6", "[cli]")
{
    ScratchDatabase db;
    ScratchDir scratch("orch-ids-");
    const auto dir = scratch.path().string();
    for (auto [exe, flag] : std::vector<std::pair<std::string, std::string>>{{"crawl_worker", "--crawl-id"},
                                                                             {"snapshot_worker", "--snapshot-id"}}) {
        INFO(exe);
        auto bad = run_command({bin_path(exe).string(), flag, "not-a-uuid", "--database-url", db.url(), "--data-dir", dir});
        CHECK(bad.exit_code == 7);
        CHECK(bad.err.find("'not-a-uuid' is not a valid id") != std::string::npos);
        auto unknown = run_command({bin_path(exe).string(), flag, "00000000-0000-4000-8000-000000000000",
                                    "--database-url", db.url(), "--data-dir", dir});
        CHECK(unknown.exit_code == 6);
        CHECK(unknown.err.find("not found") != std::string::npos);
    }
}
