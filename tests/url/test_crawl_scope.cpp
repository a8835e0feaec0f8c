#include "common/url/crawl_scope.hpp"
#include "common/url/registrable_domain.hpp"

#include <catch2/catch.hpp>

using namespace orch;

namespace {

bool in(const CrawlScope& scope, const std::string& url)
{
    auto c = check_url(url);
    INFO(url << " -> " << c.error);
    REQUIRE(c.valid);
    return scope.contains(*c.valid);
}

} // namespace

TEST_CASE("registrable_domain follows the Public Suffix List - private section too", "[url][scope]")
{
    CHECK(registrable_domain("a.example.co.uk") == "example.co.uk");
    CHECK(registrable_domain("b.example.co.uk") == "example.co.uk");
    CHECK(registrable_domain("example.co.uk") == "example.co.uk");
    CHECK(registrable_domain("other.co.uk") == "other.co.uk");
    CHECK(registrable_domain("x.github.io") == "x.github.io");
    CHECK(registrable_domain("deep.x.github.io") == "x.github.io");
    CHECK(registrable_domain("www.example.com") == "example.com");
    CHECK(registrable_domain("xn--bcher-kva.example") == "xn--bcher-kva.example");
    // No registrable domain: the host is its own.
    CHECK(registrable_domain("co.uk") == "co.uk");
    CHECK(registrable_domain("localhost") == "localhost");
    CHECK(registrable_domain("127.0.0.1") == "127.0.0.1");
    CHECK(registrable_domain("[::1]") == "[::1]");
}

TEST_CASE("scope names: the five modes and nothing else", "[url][scope]")
{
    for (auto mode : {ScopeMode::page, ScopeMode::prefix, ScopeMode::host, ScopeMode::domain, ScopeMode::any}) {
        CHECK(parse_scope_mode(to_string(mode)) == mode);
    }
    CHECK_FALSE(parse_scope_mode("Host"));
    CHECK_FALSE(parse_scope_mode(""));
    CHECK_FALSE(parse_scope_mode("site"));
    CHECK(k_default_scope == ScopeMode::host);
}

TEST_CASE("domain scope: one registrable domain - across co.uk and github.io", "[url][scope]")
{
    const CrawlScope uk(ScopeMode::domain, {"https://a.example.co.uk/start"});
    CHECK(in(uk, "https://a.example.co.uk/x"));
    CHECK(in(uk, "http://b.example.co.uk/"));
    CHECK(in(uk, "https://example.co.uk/"));
    CHECK(in(uk, "https://www.example.co.uk:8443/"));
    CHECK_FALSE(in(uk, "https://other.co.uk/"));
    CHECK_FALSE(in(uk, "https://co.uk/"));
    CHECK_FALSE(in(uk, "https://example.com/"));

    const CrawlScope gh(ScopeMode::domain, {"https://x.github.io/"});
    CHECK(in(gh, "https://x.github.io/repo/"));
    CHECK(in(gh, "https://docs.x.github.io/"));
    CHECK_FALSE(in(gh, "https://y.github.io/"));
    CHECK_FALSE(in(gh, "https://github.io/"));

    const CrawlScope ip(ScopeMode::domain, {"http://127.0.0.1:8000/"});
    CHECK(in(ip, "http://127.0.0.1:9000/"));
    CHECK_FALSE(in(ip, "http://127.0.0.2:8000/"));
}

TEST_CASE("host scope: the seeds' hosts and their www twins - any scheme and port", "[url][scope]")
{
    const CrawlScope scope(ScopeMode::host, {"http://example.com/a/b", "https://www.other.test/"});
    CHECK(in(scope, "http://example.com/"));
    CHECK(in(scope, "https://example.com:8443/z"));
    CHECK(in(scope, "http://www.example.com/"));
    CHECK(in(scope, "http://other.test/"));
    CHECK(in(scope, "http://WWW.OTHER.TEST/q"));
    CHECK_FALSE(in(scope, "http://sub.example.com/"));
    CHECK_FALSE(in(scope, "http://www.www.example.com/"));
    CHECK_FALSE(in(scope, "http://example.org/"));
    const CrawlScope ip(ScopeMode::host, {"http://127.0.0.1:8000/"});
    CHECK(in(ip, "http://127.0.0.1:8000/x"));
    CHECK_FALSE(in(ip, "http://127.0.0.2:8000/"));
}

TEST_CASE("prefix scope: same scheme host and port - under the seed's directory", "[url][scope]")
{
    const CrawlScope scope(ScopeMode::prefix, {"http://a.test:8000/docs/index.html?x=1"});
    CHECK(in(scope, "http://a.test:8000/docs/"));
    CHECK(in(scope, "http://a.test:8000/docs/deeper/page?y"));
    CHECK_FALSE(in(scope, "http://a.test:8000/docsx"));
    CHECK_FALSE(in(scope, "http://a.test:8000/"));
    CHECK_FALSE(in(scope, "https://a.test:8000/docs/"));
    CHECK_FALSE(in(scope, "http://a.test/docs/"));
    CHECK_FALSE(in(scope, "http://www.a.test:8000/docs/"));
    // A seed that is a directory is its own prefix; the root covers the host.
    CHECK(in(CrawlScope(ScopeMode::prefix, {"http://a.test/docs/"}), "http://a.test/docs/x"));
    CHECK(in(CrawlScope(ScopeMode::prefix, {"http://a.test"}), "http://a.test/any/thing"));
}

TEST_CASE("page scope takes only the seeds - any scope takes everything", "[url][scope]")
{
    const CrawlScope page(ScopeMode::page, {"http://a.test/p"});
    CHECK(in(page, "http://A.test:80/p#top"));
    CHECK_FALSE(in(page, "http://a.test/p2"));
    CHECK_FALSE(in(page, "http://a.test/"));
    const CrawlScope any(ScopeMode::any, {"http://a.test/p"});
    CHECK(in(any, "https://elsewhere.example/"));
    // Seeds are normalised as URLs are: a seed written another way is the same seed.
    CHECK(in(CrawlScope(ScopeMode::host, {"http://EXAMPLE.com./"}), "http://example.com/"));
}
