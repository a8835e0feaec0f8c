#include "common/archive/sha256.hpp"
#include "common/archive/wacz_package.hpp"
#include "tests/archive/warc_writer.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <system_error>

using namespace orch;
using namespace orch::test;

namespace {

// A member of a zip file, read by Python's zipfile (not by our code).
std::string zip_member(const std::filesystem::path& zip, const std::string& name)
{
    auto r = run_command({"/usr/bin/python3", "-c",
                          "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))",
                          zip.string(), name});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
}

std::vector<std::string> files_in(const std::filesystem::path& dir)
{
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace

TEST_CASE("a WACZ 1.1.1 package: stored WARCs with index and pages and datapackage and its digest", "[archive][wacz]")
{
    ScratchDir dir("orch-wacz-");
    const auto warc = gzip_member(warcinfo_record("2024-01-02T03:04:05Z")) +
                      gzip_member(response_record("http://a.test/", "2024-01-02T03:04:06Z", "text/html", "<p>a</p>"));
    write_bytes(dir / "a.warc.gz", warc);
    WaczInput input;
    input.warcs = {{"a.warc.gz", dir / "a.warc.gz"}};
    input.pages = {{"http://a.test/", "2024-01-02T03:04:06Z", "Page A"}};
    input.title = "test crawl";
    input.main_page_url = "http://a.test/";
    input.main_page_date = "2024-01-02T03:04:06Z";
    input.software = "orchestrator test";
    std::filesystem::create_directories(dir / "out");
    const auto target = dir / "out" / "crawl.wacz";
    const auto result = write_wacz(target, input);
    CHECK(result.index_lines == 1);
    CHECK(result.notes.empty());
    CHECK(files_in(dir / "out") == std::vector<std::string>{"crawl.wacz"});  // no temporary left

    auto listing = run_command({"/usr/bin/python3", "-m", "zipfile", "-l", target.string()});
    INFO(listing.err);
    REQUIRE(listing.exit_code == 0);
    for (const char* name : {"archive/a.warc.gz", "indexes/index.cdxj", "pages/pages.jsonl", "datapackage.json",
                             "datapackage-digest.json"}) {
        CHECK_THAT(listing.out, Catch::Contains(name));
    }
    // Every member stored, not compressed (replay reads WARC records at their offsets).
    auto stored = run_command({"/usr/bin/python3", "-c",
                               "import sys, zipfile; print(sorted({i.compress_type for i in "
                               "zipfile.ZipFile(sys.argv[1]).infolist()}))",
                               target.string()});
    CHECK(stored.out == "[0]\n");
    CHECK(zip_member(target, "archive/a.warc.gz") == warc);

    const auto pages = zip_member(target, "pages/pages.jsonl");
    CHECK(pages == "{\"format\":\"json-pages-1.0\",\"id\":\"pages\",\"title\":\"All Pages\"}\n"
                   "{\"url\":\"http://a.test/\",\"ts\":\"2024-01-02T03:04:06Z\",\"title\":\"Page A\"}\n");
    const auto cdxj = zip_member(target, "indexes/index.cdxj");
    CHECK(cdxj.rfind("test,a)/ 20240102030406 {\"url\":\"http://a.test/\"", 0) == 0);

    const auto datapackage_text = zip_member(target, "datapackage.json");
    const auto datapackage = nlohmann::json::parse(datapackage_text);
    CHECK(datapackage["profile"] == "data-package");
    CHECK(datapackage["wacz_version"] == "1.1.1");
    CHECK(datapackage["mainPageUrl"] == "http://a.test/");
    CHECK(datapackage["mainPageDate"] == "2024-01-02T03:04:06Z");
    CHECK(datapackage["software"] == "orchestrator test");
    CHECK(datapackage["created"].get<std::string>().size() == 20);
    REQUIRE(datapackage["resources"].size() == 3);
    for (const auto& r : datapackage["resources"]) {
        const auto bytes = zip_member(target, r["path"].get<std::string>());
        CHECK(r["hash"] == "sha256:" + sha256_hex(bytes));
        CHECK(r["bytes"] == bytes.size());
        CHECK(r["name"] == std::filesystem::path(r["path"].get<std::string>()).filename().string());
    }
    const auto digest = nlohmann::json::parse(zip_member(target, "datapackage-digest.json"));
    CHECK(digest["path"] == "datapackage.json");
    CHECK(digest["hash"] == "sha256:" + sha256_hex(datapackage_text));

    SECTION("a directory that is missing: an error, no file")
    {
        CHECK_THROWS_AS(write_wacz(dir / "missing" / "x.wacz", input), std::system_error);
        CHECK_FALSE(std::filesystem::exists(dir / "missing"));
    }
    SECTION("a WARC that cannot be read: an error, and the temporary file removed")
    {
        input.warcs.push_back({"gone.warc.gz", dir / "gone.warc.gz"});
        CHECK_THROWS(write_wacz(dir / "out" / "second.wacz", input));
        CHECK(files_in(dir / "out") == std::vector<std::string>{"crawl.wacz"});
    }
    SECTION("no WARC, or a name twice: refused before anything is written")
    {
        WaczInput none = input;
        none.warcs.clear();
        CHECK_THROWS_AS(write_wacz(dir / "out" / "none.wacz", none), std::invalid_argument);
        WaczInput twice = input;
        twice.warcs.push_back(input.warcs[0]);
        CHECK_THROWS_AS(write_wacz(dir / "out" / "twice.wacz", twice), std::invalid_argument);
        CHECK(files_in(dir / "out") == std::vector<std::string>{"crawl.wacz"});
    }
}
