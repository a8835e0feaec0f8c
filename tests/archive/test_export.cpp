#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sstream>

using namespace orch::test;

namespace {

// A stand-in for a capturing plugin: writes warc/capture.warc.gz in its
// directory (a warcinfo record, then a response of $url, each its own gzip
// member, sha256 digests), sets the title "T <url>" and succeeds. `then` runs
// after the file is written (e.g. to cut it).
std::string warc_hook(const std::string& then = "")
{
    return R"SH(d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
digest() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
rec() {
  printf 'WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%s>\r\nWARC-Target-URI: %s\r\nWARC-Date: %s\r\nContent-Type: %s\r\nWARC-Block-Digest: sha256:%s\r\nWARC-Payload-Digest: sha256:%s\r\nContent-Length: %s\r\n\r\n%s\r\n\r\n' \
    "$1" "$(cat /proc/sys/kernel/random/uuid)" "$2" "$d" "$3" "$(digest "$4")" "$(digest "$5")" "$(printf '%s' "$4" | wc -c)" "$4" | gzip -n -c
}
body="<html><title>T</title>$url</html>"
http=$(printf 'HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body")
mkdir -p warc
{ rec warcinfo "" application/warc-fields "software: test" "software: test"
  rec response "$url" "application/http; msgtype=response" "$http" "$body"
  rec response "$url?again=1" "application/http; msgtype=response" "$http" "$body"; } > warc/capture.warc.gz
)SH" + then + "\necho '{\"type\":\"Snapshot\",\"title\":\"T '\"$url\"'\"}'\n" + succeeded_record("captured");
}

struct ExportFixture : CrawlFixture {
    CommandResult export_wacz(const std::string& crawl_id, const std::filesystem::path& target)
    {
        return run_command({bin_path("orchestrator").string(), "export", crawl_id, "--wacz", target.string(),
                            "--database-url", db.url(), "--data-dir", data.string()},
                           {{"DATABASE_URL", ""}, {"DATA_DIR", ""}});
    }
    // A crawl of site_urls(n) run to its seal by the real crawl worker.
    std::string sealed_crawl(int n, const CrawlEnv& extra = {})
    {
        const auto id = add_crawl(site_urls(n));
        auto worker = run(id, extra);
        INFO(worker->output());
        REQUIRE(worker->exit_code() == 0);
        REQUIRE(scalar("SELECT status FROM crawl WHERE id = " + quote(id)) == "sealed");
        return id;
    }
};

std::string zip_member(const std::filesystem::path& zip, const std::string& name)
{
    auto r = run_command({"/usr/bin/python3", "-c",
                          "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))",
                          zip.string(), name});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
}

std::vector<std::string> lines_of(const std::string& text)
{
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

} // namespace

TEST_CASE("export writes a sealed crawl's WARC files as a WACZ", "[archive][export]")
{
    ExportFixture f;
    f.write_hook("warcer", "on_Snapshot__10_warc.sh", warc_hook());
    const auto id = f.sealed_crawl(2);
    const auto target = f.root / "crawl.wacz";
    auto r = f.export_wacz(id, target);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());

    auto listing = run_command({"/usr/bin/python3", "-m", "zipfile", "-l", target.string()});
    REQUIRE(listing.exit_code == 0);
    CHECK_THAT(listing.out, Catch::Contains("archive/capture.warc.gz"));
    // The second snapshot's file of the same name, under its snapshot's id.
    CHECK_THAT(listing.out, Catch::Contains("-warcer-capture.warc.gz"));
    const auto index = lines_of(zip_member(target, "indexes/index.cdxj"));
    REQUIRE(index.size() == 4);
    CHECK(index[0].rfind("test,site)/1 ", 0) == 0);
    CHECK(index[1].rfind("test,site)/1?again=1 ", 0) == 0);
    CHECK(index[2].rfind("test,site)/2 ", 0) == 0);
    CHECK_THAT(index[0], Catch::Contains("\"mime\":\"text/html\",\"status\":\"200\",\"digest\":\""));
    const auto pages = lines_of(zip_member(target, "pages/pages.jsonl"));
    REQUIRE(pages.size() == 3);
    CHECK(pages[0] == R"({"format":"json-pages-1.0","id":"pages","title":"All Pages"})");
    const auto first = nlohmann::json::parse(pages[1]);
    CHECK(first["url"] == "http://site.test/1");
    CHECK(first["title"] == "T http://site.test/1");
    CHECK(first["ts"].get<std::string>().size() == 20);
    const auto datapackage = nlohmann::json::parse(zip_member(target, "datapackage.json"));
    CHECK(datapackage["wacz_version"] == "1.1.1");
    CHECK(datapackage["mainPageUrl"] == "http://site.test/1");
    CHECK(datapackage["mainPageDate"] == first["ts"]);
    CHECK(datapackage["resources"].size() == 4);
    // Nothing but the package is left beside it.
    for (const auto& e : std::filesystem::directory_iterator(f.root.path())) {
        CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
    }

    SECTION("a FILE whose directory is missing, or that is a directory: exit 7, no file")
    {
        auto missing = f.export_wacz(id, f.root / "missing" / "x.wacz");
        CHECK(missing.exit_code == 7);
        CHECK_THAT(missing.err, Catch::Contains("missing/x.wacz"));
        CHECK_FALSE(std::filesystem::exists(f.root / "missing"));
        auto directory = f.export_wacz(id, f.root);
        CHECK(directory.exit_code == 7);
        CHECK_THAT(directory.err, Catch::Contains("is a directory"));
    }
}

TEST_CASE("export refuses an unknown or unsealed or WARC-less crawl", "[archive][export]")
{
    ExportFixture f;
    const auto target = f.root / "x.wacz";
    SECTION("an unknown crawl: exit 6; a malformed id: exit 7")
    {
        auto r = f.export_wacz("00000000-0000-4000-8000-000000000000", target);
        CHECK(r.exit_code == 6);
        CHECK_THAT(r.err, Catch::Contains("not found"));
        CHECK(f.export_wacz("not-a-uuid", target).exit_code == 7);
    }
    SECTION("a crawl not sealed yet: exit 11")
    {
        const auto id = f.add_crawl(ExportFixture::site_urls(1));
        auto r = f.export_wacz(id, target);
        CHECK(r.exit_code == 11);
        CHECK_THAT(r.err, Catch::Contains("not sealed"));
    }
    SECTION("a crawl without a WARC file: exit 6, named")
    {
        f.write_hook("plain", "on_Snapshot__10_plain.sh", "echo hi > page.html\n" + succeeded_record("plain"));
        const auto id = f.sealed_crawl(1);
        auto r = f.export_wacz(id, target);
        CHECK(r.exit_code == 6);
        CHECK_THAT(r.err, Catch::Contains("no WARC file"));
    }
    CHECK_FALSE(std::filesystem::exists(target));
}

TEST_CASE("export indexes a cut WARC up to its last complete record and names the cut", "[archive][export]")
{
    ExportFixture f;
    // A writer killed mid-record: the last gzip member loses its end.
    f.write_hook("warcer", "on_Snapshot__10_warc.sh",
                 warc_hook("head -c -30 warc/capture.warc.gz > warc/cut && mv warc/cut warc/capture.warc.gz"));
    const auto id = f.sealed_crawl(1);
    const auto target = f.root / "cut.wacz";
    auto r = f.export_wacz(id, target);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("cut short") && Catch::Contains("capture.warc.gz"));
    const auto index = lines_of(zip_member(target, "indexes/index.cdxj"));
    REQUIRE(index.size() == 1);
    CHECK(index[0].rfind("test,site)/1 ", 0) == 0);
}

TEST_CASE("a crawl writes its own WACZ at its end when its config says so", "[archive][export]")
{
    ExportFixture f;
    const auto wacz_of = [&](const std::string& id) { return f.data / "crawls" / id / "wacz" / (id + ".wacz"); };
    SECTION("off by default")
    {
        f.write_hook("warcer", "on_Snapshot__10_warc.sh", warc_hook());
        const auto id = f.sealed_crawl(1);
        CHECK_FALSE(std::filesystem::exists(wacz_of(id)));
    }
    SECTION("WACZ_ENABLED=true in the environment")
    {
        f.write_hook("warcer", "on_Snapshot__10_warc.sh", warc_hook());
        const auto id = f.sealed_crawl(2, {{"WACZ_ENABLED", "true"}});
        REQUIRE(std::filesystem::exists(wacz_of(id)));
        CHECK(lines_of(zip_member(wacz_of(id), "indexes/index.cdxj")).size() == 4);
    }
    SECTION("a wacz plugin folder with no hooks, its config.json enabled")
    {
        f.write_hook("warcer", "on_Snapshot__10_warc.sh", warc_hook());
        f.write_config("wacz", R"({"enabled": true})");
        const auto id = f.sealed_crawl(1);
        CHECK(std::filesystem::exists(wacz_of(id)));
    }
    SECTION("a WACZ that cannot be written is journalled; the crawl is sealed all the same")
    {
        f.write_hook("plain", "on_Snapshot__10_plain.sh", "echo hi > page.html\n" + succeeded_record("plain"));
        const auto id = f.sealed_crawl(1, {{"WACZ_ENABLED", "true"}});
        CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
        CHECK_FALSE(std::filesystem::exists(wacz_of(id)));
        CHECK_THAT(f.scalar("SELECT message FROM ops.events WHERE kind = 'crawl.wacz_failed' AND crawl_id = " +
                            f.quote(id)),
                   Catch::Contains("no WARC file"));
    }
}
