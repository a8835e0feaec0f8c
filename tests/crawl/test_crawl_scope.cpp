// A crawl's scope (common/url/crawl_scope.hpp) end to end: `orchestrator add
// --scope`, the real crawl_worker and snapshot_workers, and what becomes a
// child snapshot or a row of crawl_skipped_url (migrations/0024). The hooks
// emit their links without fetching anything: no server is needed, and none
// is contacted.
#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace orch::test;

namespace {

const std::string k_seed = "http://127.0.0.1:18080/docs/index.html";
const std::string k_second_seed = "http://localhost:18080/";

// Every page links to the first seed itself, to a page under its directory,
// to one elsewhere on its host, to its host on another port, to another
// address, and to the www. twin of the second seed's host.
void write_links_hook(CrawlFixture& f)
{
    f.write_hook("links", "on_Snapshot__10_links.sh",
                 "for u in " + k_seed +
                     " http://127.0.0.1:18080/docs/a http://127.0.0.1:18080/other "
                     "http://127.0.0.1:9999/docs/a http://127.0.0.2:18080/ http://www.localhost:18080/w; do\n"
                     "  printf '{\"type\":\"Snapshot\",\"url\":\"%s\"}\\n' \"$u\"\n"
                     "done\n" +
                     succeeded_record("links"));
}

// The crawl's snapshots below the seeds, by URL, space-separated.
std::string children(CrawlFixture& f, const std::string& id)
{
    return f.scalar("SELECT coalesce(string_agg(url, ' ' ORDER BY url), '') FROM snapshot WHERE depth = 1 AND crawl_id = " +
                    f.quote(id));
}

std::string skipped(CrawlFixture& f, const std::string& id)
{
    return f.scalar("SELECT coalesce(string_agg(url || '=' || reason, ' ' ORDER BY url), '') "
                    "FROM crawl_skipped_url WHERE crawl_id = " + f.quote(id));
}

std::string crawl_with(CrawlFixture& f, const std::vector<std::string>& options)
{
    std::vector<std::string> all{"--depth", "1"};
    all.insert(all.end(), options.begin(), options.end());
    auto id = f.add_crawl({k_seed, k_second_seed}, all);
    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    return id;
}

} // namespace

TEST_CASE("crawl scope: host by default - another address is skipped as out_of_scope", "[crawl_worker][scope]")
{
    CrawlFixture f;
    write_links_hook(f);
    auto id = crawl_with(f, {});
    CHECK(f.scalar("SELECT scope FROM crawl WHERE id = " + f.quote(id)) == "host");
    CHECK(children(f, id) == "http://127.0.0.1:18080/docs/a http://127.0.0.1:18080/other "
                             "http://127.0.0.1:9999/docs/a http://www.localhost:18080/w");
    CHECK(skipped(f, id) == "http://127.0.0.2:18080/=out_of_scope");
    // The seed page's own links output is untouched by the scope: it is the hook's.
    CHECK(f.count("SELECT count(*) FROM crawl_skipped_count") == 0);
    // The crawl's report names the skipped link by reason.
    auto report = run_command({bin_path("orchestrator").string(), "report", id, "--json", "--database-url",
                               f.db.url(), "--data-dir", f.data.string()});
    INFO(report.err);
    REQUIRE(report.exit_code == 0);
    auto skipped_section = nlohmann::json::parse(report.out).at("skipped");
    REQUIRE(skipped_section.size() == 1);
    CHECK(skipped_section[0]["reason"] == "out_of_scope");
    CHECK(skipped_section[0]["urls"] == 1);
    CHECK(skipped_section[0]["example_url"] == "http://127.0.0.2:18080/");
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl scope: any follows every link - as crawls before scopes did", "[crawl_worker][scope]")
{
    CrawlFixture f;
    write_links_hook(f);
    auto id = crawl_with(f, {"--scope", "any"});
    CHECK(children(f, id) == "http://127.0.0.1:18080/docs/a http://127.0.0.1:18080/other "
                             "http://127.0.0.1:9999/docs/a http://127.0.0.2:18080/ http://www.localhost:18080/w");
    CHECK(skipped(f, id).empty());
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl scope: page prefix and domain", "[crawl_worker][scope]")
{
    CrawlFixture f;
    write_links_hook(f);
    SECTION("page: the seeds only")
    {
        auto id = crawl_with(f, {"--scope", "page"});
        CHECK(children(f, id).empty());
        CHECK(f.count("SELECT count(*) FROM snapshot WHERE crawl_id = " + f.quote(id)) == 2);
        CHECK(skipped(f, id) == "http://127.0.0.1:18080/docs/a=out_of_scope http://127.0.0.1:18080/other=out_of_scope "
                                "http://127.0.0.1:9999/docs/a=out_of_scope http://127.0.0.2:18080/=out_of_scope "
                                "http://www.localhost:18080/w=out_of_scope");
    }
    SECTION("prefix: under the seed's directory, on its scheme, host and port")
    {
        auto id = crawl_with(f, {"--scope", "prefix"});
        CHECK(children(f, id) == "http://127.0.0.1:18080/docs/a");
        CHECK(f.count("SELECT count(*) FROM crawl_skipped_url WHERE reason = 'out_of_scope' AND crawl_id = " +
                      f.quote(id)) == 4);
    }
    SECTION("domain: the registrable domain (an address is its own; localhost is a suffix of its own)")
    {
        auto id = crawl_with(f, {"--scope", "domain"});
        CHECK(children(f, id) ==
              "http://127.0.0.1:18080/docs/a http://127.0.0.1:18080/other http://127.0.0.1:9999/docs/a");
        CHECK(skipped(f, id) == "http://127.0.0.2:18080/=out_of_scope http://www.localhost:18080/w=out_of_scope");
    }
    SECTION("combined with url_deny: the deny pattern's links are skipped as denied")
    {
        auto id = crawl_with(f, {"--config", R"({"url_deny": "/other$"})"});
        CHECK(children(f, id) ==
              "http://127.0.0.1:18080/docs/a http://127.0.0.1:9999/docs/a http://www.localhost:18080/w");
        CHECK(skipped(f, id) == "http://127.0.0.1:18080/other=denied http://127.0.0.2:18080/=out_of_scope");
    }
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl scope: an unknown --scope is refused as a usage error - nothing stored", "[crawl_worker][scope]")
{
    CrawlFixture f;
    for (const std::string sub : {"add", "schedule"}) {
        std::vector<std::string> argv{bin_path("orchestrator").string()};
        if (sub == "schedule") {
            argv.insert(argv.end(), {"schedule", "add", "--every", "@daily"});
        } else {
            argv.push_back("add");
        }
        argv.insert(argv.end(), {"--database-url", f.db.url(), "--data-dir", f.data.string(), "--scope", "site", k_seed});
        auto r = run_command(argv);
        INFO(r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("--scope"));
    }
    CHECK(f.count("SELECT count(*) FROM crawl") == 0);
    CHECK(f.count("SELECT count(*) FROM crawl_schedule") == 0);
}
