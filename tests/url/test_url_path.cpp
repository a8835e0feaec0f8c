#include "common/url/url.hpp"
#include "common/url/url_path.hpp"

#include <catch2/catch.hpp>

using namespace orch;

TEST_CASE("remove_dot_segments follows RFC 3986 section 5.2.4", "[url][url_path]")
{
    // The two worked examples of the RFC.
    CHECK(remove_dot_segments("/a/b/c/./../../g") == "/a/g");
    CHECK(remove_dot_segments("mid/content=5/../6") == "mid/6");
    CHECK(remove_dot_segments("/a/../b") == "/b");
    CHECK(remove_dot_segments("/./x") == "/x");
    CHECK(remove_dot_segments("/a/b/..") == "/a/");
    CHECK(remove_dot_segments("/a/b/.") == "/a/b/");
    CHECK(remove_dot_segments("/..") == "/");
    CHECK(remove_dot_segments("/../../x") == "/x");
    CHECK(remove_dot_segments("/a/..") == "/");
    CHECK(remove_dot_segments("/a//../b") == "/a/b");
    CHECK(remove_dot_segments("/") == "/");
    CHECK(remove_dot_segments("") == "");
    // Segments that only contain dots are not dot segments.
    CHECK(remove_dot_segments("/.../a/..b/b../.x") == "/.../a/..b/b../.x");
    // Percent-encoded dots are left to the server (only literal ones are steps).
    CHECK(remove_dot_segments("/a/%2e%2e/b") == "/a/%2e%2e/b");
}

TEST_CASE("check_url removes dot segments from the path and leaves the query alone", "[url][url_path]")
{
    auto ok = [](const std::string& in) {
        auto c = check_url(in);
        INFO(in << " -> " << c.error);
        REQUIRE(c.valid);
        return c.valid->url;
    };
    CHECK(ok("http://a.test/a/../b") == "http://a.test/b");
    CHECK(ok("http://a.test/./x") == "http://a.test/x");
    CHECK(ok("http://a.test/..") == "http://a.test/");
    CHECK(ok("http://a.test/a/b/../../../c") == "http://a.test/c");
    CHECK(ok("http://a.test/a/./b/.?x=1") == "http://a.test/a/b/?x=1");
    CHECK(ok("http://a.test/a/../b?next=/x/../y/./z") == "http://a.test/b?next=/x/../y/./z");
    CHECK(ok("http://a.test?q=/../x") == "http://a.test/?q=/../x");
    CHECK(ok("http://a.test/a/../b#/../frag") == "http://a.test/b");
    // "%2E" is a '.' (RFC 3986 6.2.2.2, and browsers): decoded, then a dot segment.
    CHECK(ok("http://a.test/a/%2e%2e/b") == "http://a.test/b");
    CHECK(ok("http://a.test/a/.%2E/b") == "http://a.test/b");
}
