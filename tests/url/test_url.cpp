#include "common/url/url.hpp"
#include "common/base/printable.hpp"

#include <catch2/catch.hpp>

using namespace orch;

TEST_CASE("check_url accepts and normalises http(s) URLs", "[url]")
{
    auto ok = [](const std::string& in) {
        auto c = check_url(in);
        INFO(in << " -> " << c.error);
        REQUIRE(c.valid);
        return c.valid->url;
    };
    CHECK(ok("http://example.com") == "http://example.com/");
    CHECK(ok("HTTPS://Example.COM:443/Path?q=1#frag") == "https://example.com/Path?q=1");
    CHECK(ok("http://example.com:8080/x") == "http://example.com:8080/x");
    CHECK(ok("http://127.0.0.1:80/") == "http://127.0.0.1/");
    CHECK(ok("http://[::1]:8000/a") == "http://[::1]:8000/a");
    CHECK(ok("http://example.com?x=1") == "http://example.com/?x=1");
    CHECK(ok("http://example.com/caf\xc3\xa9") == "http://example.com/caf%C3%A9");
}

TEST_CASE("check_url rejects what cannot be archived - naming the problem", "[url]")
{
    auto bad = [](const std::string& in) {
        auto c = check_url(in);
        CHECK_FALSE(c.valid);
        return c.error;
    };
    CHECK(bad("") == "empty URL");
    CHECK(bad("ftp://x").find("unsupported scheme 'ftp'") != std::string::npos);
    CHECK(bad("javascript:alert(1)").find("unsupported scheme") != std::string::npos);
    CHECK(bad("file:///etc/passwd").find("unsupported scheme 'file'") != std::string::npos);
    CHECK(bad("http://").find("no host") != std::string::npos);
    CHECK(bad("http:example.com").find("must start with") != std::string::npos);
    CHECK(bad("http://exa mple.com").find("whitespace") != std::string::npos);
    CHECK(bad("http://a.test/\n").find("control") != std::string::npos);
    CHECK(bad(std::string("http://a.test/\0x", 16)).find("control") != std::string::npos);
    CHECK(bad("http://a.test/\xff\xfe").find("UTF-8") != std::string::npos);
    CHECK(bad("http://a.test:99999/").find("port") != std::string::npos);
    CHECK(bad("http://a.test:/").find("port") != std::string::npos);
    CHECK(bad("http://a.test/" + std::string(k_max_url_length, 'a')).find("longer than") != std::string::npos);
    CHECK(bad("http://a<b>.test/").find("invalid characters") != std::string::npos);
}

TEST_CASE("resolve_url resolves references against a page URL", "[url]")
{
    CHECK(resolve_url("http://a.test/dir/page.html", "other.html") == "http://a.test/dir/other.html");
    CHECK(resolve_url("http://a.test/dir/page.html", "/root.html") == "http://a.test/root.html");
    CHECK(resolve_url("http://a.test/dir/page.html", "//b.test/x") == "http://b.test/x");
    CHECK(resolve_url("http://a.test/dir/page.html", "https://c.test/") == "https://c.test/");
    CHECK(resolve_url("http://a.test/dir/page.html?q", "?x=1") == "http://a.test/dir/page.html?x=1");
    CHECK(resolve_url("http://a.test", "x.html") == "http://a.test/x.html");
}

TEST_CASE("printable escapes binary and truncates", "[url]")
{
    CHECK(printable("a\nb\x01") == "a\\nb\\x01");
    CHECK(printable(std::string(300, 'x'), 10).find("(300 bytes)") != std::string::npos);
}
