// The normal form of docs/urls-and-scope.md, case by case, from the rules of
// RFC 3986 (sections 3, 5.2, 6.2) and the WHATWG URL Standard as they apply
// to http(s) URLs.
#include "common/url/url.hpp"

#include <catch2/catch.hpp>

using namespace orch;

namespace {

std::string ok(const std::string& in)
{
    auto c = check_url(in);
    INFO(in << " -> " << c.error);
    REQUIRE(c.valid);
    return c.valid->url;
}

std::string bad(const std::string& in)
{
    auto c = check_url(in);
    INFO(in << " -> " << (c.valid ? c.valid->url : ""));
    CHECK_FALSE(c.valid);
    return c.error;
}

} // namespace

TEST_CASE("percent-encodings get one spelling", "[url][url_forms]")
{
    // RFC 3986 6.2.2.1: hex digits in upper case.
    CHECK(ok("http://a.test/%c3%a9?x=%2f") == "http://a.test/%C3%A9?x=%2F");
    // 6.2.2.2: unreserved characters decoded, everywhere but the host.
    CHECK(ok("http://a.test/%7Euser/%41%2D%5F%2E%30") == "http://a.test/~user/A-_.0");
    CHECK(ok("http://a.test/?q=%7e%61") == "http://a.test/?q=~a");
    CHECK(ok("http://%75ser@a.test/") == "http://user@a.test/");
    // Reserved characters stay encoded: "%2F" is not a path step, "%3F" not a query.
    CHECK(ok("http://a.test/a%2Fb%3Fc") == "http://a.test/a%2Fb%3Fc");
    // What RFC 3986 allows nowhere is encoded as the WHATWG percent-encode sets
    // do; a '%' that starts no "%XX" is a literal '%'.
    CHECK(ok("http://a.test/a\"b<c>d`e{f}g|h^i") == "http://a.test/a%22b%3Cc%3Ed%60e%7Bf%7Dg%7Ch%5Ei");
    CHECK(ok("http://a.test/100%") == "http://a.test/100%25");
    CHECK(ok("http://a.test/%zz?%4") == "http://a.test/%25zz?%254");
    CHECK(ok("http://a.test/caf%C3%A9") == ok("http://a.test/caf\xc3\xa9"));
    CHECK(ok("http://a.test/?q=\xe2\x82\xac") == "http://a.test/?q=%E2%82%AC");
    // Brackets are only an IPv6 host's; in a path or query they are encoded.
    CHECK(ok("http://a.test/x[1]?y[]=2") == "http://a.test/x%5B1%5D?y%5B%5D=2");
}

TEST_CASE("dot segments are removed from the path only", "[url][url_forms]")
{
    // RFC 3986 5.4.1/5.4.2 results, as absolute URLs.
    CHECK(ok("http://a/b/c/./g") == "http://a/b/c/g");
    CHECK(ok("http://a/b/c/g/") == "http://a/b/c/g/");
    CHECK(ok("http://a/b/c/../g") == "http://a/b/g");
    CHECK(ok("http://a/b/c/../..") == "http://a/");
    CHECK(ok("http://a/../../../g") == "http://a/g");
    CHECK(ok("http://a/b/c/g.") == "http://a/b/c/g.");
    CHECK(ok("http://a/b/c/..g") == "http://a/b/c/..g");
    CHECK(ok("http://a/b/c/./../g") == "http://a/b/g");
    CHECK(ok("http://a/b/c/g;x=1/../y") == "http://a/b/c/y");
    // WHATWG: "%2e" and "%2E" are dots too.
    CHECK(ok("http://a/b/%2e/c/%2E%2e/d") == "http://a/b/d");
    CHECK(ok("http://a/b?c/../d") == "http://a/b?c/../d");
}

TEST_CASE("scheme - host and port are case-folded and defaulted", "[url][url_forms]")
{
    CHECK(ok("HtTp://A.TEST/P") == "http://a.test/P");
    CHECK(ok("http://a.test:80/") == "http://a.test/");
    CHECK(ok("https://a.test:443/") == "https://a.test/");
    CHECK(ok("http://a.test:443/") == "http://a.test:443/");
    CHECK(ok("https://a.test:80/") == "https://a.test:80/");
    // WHATWG: a port is a number; leading zeros are not part of it.
    CHECK(ok("http://a.test:0080/") == "http://a.test/");
    CHECK(ok("http://a.test:08080/") == "http://a.test:8080/");
    CHECK(bad("http://a.test:65536/").find("port") != std::string::npos);
    CHECK(bad("http://a.test:0/").find("port") != std::string::npos);
    CHECK(bad("http://a.test:8a/").find("port") != std::string::npos);
    CHECK(bad("http://a.test:8a8/x").find("port") != std::string::npos);
    // An empty path is "/"; an empty query is kept (it is sent); the fragment is not.
    CHECK(ok("http://a.test") == "http://a.test/");
    CHECK(ok("http://a.test?") == "http://a.test/?");
    CHECK(ok("http://a.test/#") == "http://a.test/");
    CHECK(ok("http://a.test/#a#b") == "http://a.test/");
}

TEST_CASE("IPv6 and IPv4 hosts are written one way", "[url][url_forms]")
{
    // RFC 5952 text form (inet_ntop): lower case, zeros compressed.
    CHECK(ok("http://[0:0:0:0:0:0:0:1]/") == "http://[::1]/");
    CHECK(ok("http://[2001:0DB8:0000:0000:0001:0000:0000:0001]:8080/") == "http://[2001:db8::1:0:0:1]:8080/");
    CHECK(ok("http://[::ffff:7f00:1]/") == "http://[::ffff:127.0.0.1]/");
    CHECK(ok("http://[::1]:80/") == "http://[::1]/");
    // IPvFuture and zone identifiers cannot be fetched by the workers.
    CHECK(bad("http://[v1.fe80::a]/") == "URL host is not a valid IPv6 address");
    CHECK(bad("http://[::1%25lo]/") == "URL host is not a valid IPv6 address");
    CHECK(ok("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/");
    CHECK(ok("http://1.2.3.4.test/") == "http://1.2.3.4.test/");
}

TEST_CASE("international names take their IDNA form - user info stays", "[url][url_forms]")
{
    CHECK(ok("http://\xe4\xbe\x8b\xe3\x81\x88.\xe3\x83\x86\xe3\x82\xb9\xe3\x83\x88/") ==
          "http://xn--r8jz45g.xn--zckzah/");
    CHECK(ok("http://M\xc3\x9cNCHEN.example/") == "http://xn--mnchen-3ya.example/");
    CHECK(ok("http://us%65r:p%40ss@a.test/") == "http://user:p%40ss@a.test/");
}

TEST_CASE("resolve_url follows RFC 3986 5.4", "[url][url_forms]")
{
    const std::string base = "http://a/b/c/d;p?q";
    // 5.4.1 normal examples
    CHECK(resolve_url(base, "g") == "http://a/b/c/g");
    CHECK(resolve_url(base, "./g") == "http://a/b/c/g");
    CHECK(resolve_url(base, "g/") == "http://a/b/c/g/");
    CHECK(resolve_url(base, "/g") == "http://a/g");
    CHECK(resolve_url(base, "//g") == "http://g");
    CHECK(resolve_url(base, "?y") == "http://a/b/c/d;p?y");
    CHECK(resolve_url(base, "g?y") == "http://a/b/c/g?y");
    CHECK(resolve_url(base, "#s") == "http://a/b/c/d;p?q#s");
    CHECK(resolve_url(base, "g#s") == "http://a/b/c/g#s");
    CHECK(resolve_url(base, ";x") == "http://a/b/c/;x");
    CHECK(resolve_url(base, "") == "http://a/b/c/d;p?q");
    CHECK(resolve_url(base, ".") == "http://a/b/c/");
    CHECK(resolve_url(base, "..") == "http://a/b/");
    CHECK(resolve_url(base, "../g") == "http://a/b/g");
    CHECK(resolve_url(base, "../..") == "http://a/");
    CHECK(resolve_url(base, "../../g") == "http://a/g");
    // 5.4.2 abnormal examples
    CHECK(resolve_url(base, "../../../g") == "http://a/g");
    CHECK(resolve_url(base, "/./g") == "http://a/g");
    CHECK(resolve_url(base, "/../g") == "http://a/g");
    CHECK(resolve_url(base, "g.") == "http://a/b/c/g.");
    CHECK(resolve_url(base, "g;x=1/../y") == "http://a/b/c/y");
    CHECK(resolve_url(base, "g?y/./x") == "http://a/b/c/g?y/./x");
    // What a page writes that no URI reference allows is encoded first.
    CHECK(ok(resolve_url("http://a.test/d/p", "caf\xc3\xa9 x.html")) == "http://a.test/d/caf%C3%A9%20x.html");
}
