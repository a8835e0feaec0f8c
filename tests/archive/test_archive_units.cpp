#include "common/archive/cdxj_index.hpp"
#include "common/archive/gzip_members.hpp"
#include "common/archive/sha256.hpp"
#include "common/archive/surt.hpp"
#include "common/archive/warc_file_records.hpp"
#include "common/archive/warc_record.hpp"
#include "tests/archive/warc_writer.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>

using namespace orch;
using namespace orch::test;

namespace {

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

TEST_CASE("surt keys: host reversed and lowercased with www dropped and the query sorted", "[archive][surt]")
{
    CHECK(surt_key("https://www.Example.com/A/b?z=1&a=2#frag") == "com,example)/a/b?a=2&z=1");
    CHECK(surt_key("http://example.com") == "com,example)/");
    CHECK(surt_key("http://www2.sub.example.org:8080/") == "org,example,sub:8080)/");
    CHECK(surt_key("https://example.com:443/x") == "com,example)/x");
    CHECK(surt_key("http://user:pw@example.com:80/?") == "com,example)/");
    CHECK(surt_key("http://127.0.0.1:8000/p?b&a") == "1,0,0,127:8000)/p?a&b");
    CHECK(surt_key("http://www.com/") == "com,www)/");
    CHECK(surt_key("dns:example.com") == "dns:example.com");
}

TEST_CASE("sha256 of bytes and of a file", "[archive][sha256]")
{
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ScratchDir dir("orch-archive-");
    write_bytes(dir.path() / "f", "abc");
    CHECK(sha256_file_hex(dir.path() / "f") == sha256_hex("abc"));
}

TEST_CASE("gzip members come with their offsets and compressed lengths", "[archive][gzip]")
{
    ScratchDir dir("orch-archive-");
    const std::vector<std::string> records = {warcinfo_record("2024-01-02T03:04:05Z"),
                                              response_record("http://a.test/", "2024-01-02T03:04:06Z", "text/html",
                                                              "<html>a</html>"),
                                              response_record("http://b.test/", "2024-01-02T03:04:07Z", "text/plain",
                                                              std::string(200000, 'x'))};
    std::string file;
    std::vector<std::pair<std::size_t, std::size_t>> expected;
    for (const auto& r : records) {
        const auto member = gzip_member(r);
        expected.emplace_back(file.size(), member.size());
        file += member;
    }
    write_bytes(dir.path() / "a.warc.gz", file);

    SECTION("a whole file: every member, then a clean end")
    {
        GzipMembers members(dir.path() / "a.warc.gz", 1024);
        for (std::size_t i = 0; i < records.size(); ++i) {
            auto m = members.next();
            REQUIRE(m);
            CHECK(m->offset == expected[i].first);
            CHECK(m->length == expected[i].second);
            CHECK(m->inflated_size == records[i].size());
            CHECK(m->head == records[i].substr(0, 1024));
        }
        CHECK_FALSE(members.next());
        CHECK_FALSE(members.problem());
    }
    SECTION("a last member cut short: the members before it, and the cut named")
    {
        write_bytes(dir.path() / "a.warc.gz", file.substr(0, file.size() - 100));
        GzipMembers members(dir.path() / "a.warc.gz");
        CHECK(members.next());
        CHECK(members.next());
        CHECK_FALSE(members.next());
        REQUIRE(members.problem());
        CHECK_THAT(*members.problem(), Catch::Contains("cut short") &&
                                           Catch::Contains("offset " + std::to_string(expected[2].first)));
    }
    SECTION("bytes that are not gzip after the members: named, not a crash")
    {
        write_bytes(dir.path() / "a.warc.gz", file + "garbage that is not gzip");
        GzipMembers members(dir.path() / "a.warc.gz");
        int n = 0;
        while (members.next()) {
            ++n;
        }
        CHECK(n == 3);
        CHECK(members.problem());
    }
}

TEST_CASE("a WARC record's headers and its HTTP status and type", "[archive][warc]")
{
    const auto text = response_record("http://a.test/x", "2024-01-02T03:04:05.123456Z", "Text/HTML; charset=utf-8",
                                      "<p>hi</p>");
    auto r = parse_warc_record(text);
    REQUIRE(r);
    CHECK(r->version == "WARC/1.1");
    CHECK(r->type() == "response");
    CHECK(r->field("warc-target-uri") == "http://a.test/x");
    CHECK(r->field("warc-payload-digest") == "sha256:" + sha256_hex("<p>hi</p>"));
    CHECK(r->http_status == 200);
    CHECK(r->http_mime == "text/html");
    CHECK(r->header_size + r->content_length + 4 == text.size());
    CHECK(warc_date_to_timestamp("2024-01-02T03:04:05.123456Z") == "20240102030405");
    CHECK(warc_date_to_timestamp("2024-01-02T03:04:05Z") == "20240102030405");
    CHECK_FALSE(warc_date_to_timestamp("2024-01-02 03:04:05"));
    CHECK_FALSE(parse_warc_record("HTTP/1.1 200 OK\r\n\r\n"));
    CHECK_FALSE(parse_warc_record("WARC/1.1\r\nContent-Length: x\r\n\r\n"));
}

TEST_CASE("CDXJ lines of response and revisit and resource records sorted bytewise", "[archive][cdxj]")
{
    ScratchDir dir("orch-archive-");
    const std::vector<std::string> records = {
        warcinfo_record("2024-01-02T03:04:05Z"),
        response_record("http://www.zeta.test/page?b=2&a=1", "2024-01-02T03:04:06Z", "text/html", "<html>z</html>"),
        warc_record("request", "http://www.zeta.test/page?b=2&a=1", "2024-01-02T03:04:06Z",
                    "application/http; msgtype=request", "GET /page HTTP/1.1\r\nHost: www.zeta.test\r\n\r\n"),
        response_record("http://alpha.test/", "2024-01-02T03:04:07Z", "text/html", "<html>a</html>"),
        warc_record("revisit", "http://alpha.test/", "2024-01-02T03:05:00Z", "application/http; msgtype=response",
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
                    {"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
                     "WARC-Refers-To-Target-URI: http://alpha.test/"}),
        warc_record("resource", "urn:pageinfo:http://alpha.test/", "2024-01-02T03:05:01Z", "application/json",
                    "{}")};
    std::string file;
    std::vector<std::size_t> offsets;
    for (const auto& r : records) {
        offsets.push_back(file.size());
        file += gzip_member(r);
    }
    write_bytes(dir.path() / "one.warc.gz", file);
    std::string plain;
    for (const auto& r : records) {
        plain += r;
    }
    write_bytes(dir.path() / "two.warc", plain);

    CdxjIndex index;
    index.add_warc(dir.path() / "one.warc.gz", "one.warc.gz");
    index.add_warc(dir.path() / "two.warc", "two.warc");
    CHECK(index.notes().empty());
    const auto lines = lines_of(index.text());
    REQUIRE(lines.size() == 8);  // 4 captures in each file
    CHECK(std::is_sorted(lines.begin(), lines.end()));
    CHECK(lines[0].rfind("test,alpha)/ 20240102030407 {\"url\":\"http://alpha.test/\",\"mime\":\"text/html\","
                         "\"status\":\"200\",\"digest\":\"", 0) == 0);
    CHECK(lines[2].rfind("test,alpha)/ 20240102030500 {\"url\":\"http://alpha.test/\",\"mime\":\"warc/revisit\","
                         "\"status\":\"200\"", 0) == 0);
    CHECK(lines.back().rfind("urn:pageinfo:http://alpha.test/ 20240102030501 ", 0) == 0);
    bool zeta = false;
    for (const auto& line : lines) {
        auto j = nlohmann::json::parse(line.substr(line.find('{')));
        const auto offset = std::stoull(j["offset"].get<std::string>());
        const auto length = std::stoull(j["length"].get<std::string>());
        if (j["filename"] == "one.warc.gz") {
            // Each line points at exactly one gzip member, a whole record.
            auto at = std::find(offsets.begin(), offsets.end(), offset);
            REQUIRE(at != offsets.end());
            const auto i = static_cast<std::size_t>(at - offsets.begin());
            CHECK(length == gzip_member(records[i]).size());
        } else {
            CHECK(plain.substr(offset, length).rfind("WARC/1.1\r\n", 0) == 0);
        }
        if (line.rfind("test,zeta)/page?a=1&b=2 20240102030406 ", 0) == 0) {
            zeta = true;
        }
    }
    CHECK(zeta);

    SECTION("a cut file is indexed up to its last complete record, and the cut noted")
    {
        write_bytes(dir.path() / "cut.warc.gz", file.substr(0, file.size() - 5));
        write_bytes(dir.path() / "cut.warc", plain.substr(0, plain.size() - 5));
        CdxjIndex cut;
        cut.add_warc(dir.path() / "cut.warc.gz", "cut.warc.gz");
        cut.add_warc(dir.path() / "cut.warc", "cut.warc");
        CHECK(cut.size() == 6);
        REQUIRE(cut.notes().size() == 2);
        CHECK_THAT(cut.notes()[0], Catch::Contains("cut short"));
        CHECK_THAT(cut.notes()[1], Catch::Contains("cut short"));
    }
}

TEST_CASE("the CDXJ lines agree with warcio.js cdx-index", "[archive][cdxj][warcio]")
{
    const char* from_env = std::getenv("ORCH_TEST_TOOLS");
    const std::filesystem::path tools = from_env && *from_env ? from_env : ORCH_TEST_TOOLS_BUILD_DIR;
    const auto warcio = tools / "node_modules" / ".bin" / "warcio";
    INFO("warcio.js is installed by scripts/setup (npm install --prefix <build>/test-tools warcio@2.4.11)");
    REQUIRE(std::filesystem::exists(warcio));
    ScratchDir dir("orch-archive-");
    std::string file;
    for (const auto& r : {warcinfo_record("2024-01-02T03:04:05Z"),
                          response_record("http://www.b.test/x?z=1&a=2", "2024-01-02T03:04:06Z", "text/html", "<b>"),
                          response_record("https://a.test:8443/", "2024-01-02T03:04:07Z", "image/png", "png")}) {
        file += gzip_member(r);
    }
    write_bytes(dir / "w.warc.gz", file);
    CdxjIndex index;
    index.add_warc(dir / "w.warc.gz", "w.warc.gz");
    auto r = run_command({"/usr/bin/env", "node", warcio.string(), "cdx-index", (dir / "w.warc.gz").string()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto theirs = lines_of(r.out);
    std::sort(theirs.begin(), theirs.end());
    CHECK(lines_of(index.text()) == theirs);
}
