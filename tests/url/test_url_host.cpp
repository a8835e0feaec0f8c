#include "common/url/url.hpp"
#include "common/url/url_host.hpp"

#include <catch2/catch.hpp>

using namespace orch;

namespace {

ValidUrl ok(const std::string& in)
{
    auto c = check_url(in);
    INFO(in << " -> " << c.error);
    REQUIRE(c.valid);
    return *c.valid;
}

std::string bad(const std::string& in)
{
    auto c = check_url(in);
    INFO(in << " -> " << (c.valid ? c.valid->url : ""));
    CHECK_FALSE(c.valid);
    return c.error;
}

} // namespace

TEST_CASE("check_url gives an internationalised host its one IDNA ASCII spelling", "[url][url_host]")
{
    for (const std::string in : {"http://B\xc3\x9c" "CHER.example/", "http://b\xc3\xbc" "cher.example/",
                                 "http://xn--bcher-kva.example/", "http://XN--BCHER-KVA.Example/",
                                 // full-width b and c: the UTS #46 mapping folds them
                                 "http://\xef\xbd\x82\xc3\xbc\xef\xbd\x83her.example/"}) {
        auto v = ok(in);
        CHECK(v.url == "http://xn--bcher-kva.example/");
        CHECK(v.host == "xn--bcher-kva.example");
    }
    // Nontransitional (IDNA2008): sharp s is kept, not mapped to "ss".
    CHECK(ok("http://Stra\xc3\x9f" "e.de/").url == "http://xn--strae-oqa.de/");
    CHECK(ok("http://u:p@B\xc3\x9c" "CHER.example:8080/x?q=\xc3\xbc").url ==
          "http://u:p@xn--bcher-kva.example:8080/x?q=%C3%BC");
    // The host is converted by IDNA; the path's UTF-8 is percent-encoded, as a browser sends it.
    CHECK(ok("http://b\xc3\xbc" "cher.example/b\xc3\xbc" "cher").url == "http://xn--bcher-kva.example/b%C3%BCcher");
}

TEST_CASE("check_url refuses hosts IDNA refuses - with libidn2's reason", "[url][url_host]")
{
    auto snowman = bad("http://\xe2\x98\x83.example/");
    CHECK(snowman.find("not a valid internationalised domain name") != std::string::npos);
    CHECK(snowman.find("disallowed") != std::string::npos);
    CHECK(bad("http://b\xc3\xbc" "cher-.example/").find("hyphen") != std::string::npos);
    // A full-width solidus maps to '/': it must not end up inside the host.
    CHECK(bad("http://evil.test\xef\xbc\x8f.good.test/").find("invalid") != std::string::npos);
}

TEST_CASE("check_url refuses percent-encoded hosts", "[url][url_host]")
{
    CHECK(bad("http://ex%61mple.test/").find("'%'") != std::string::npos);
    CHECK(bad("http://%62%c3%bccher.example/").find("'%'") != std::string::npos);
}

TEST_CASE("check_url enforces DNS label and name lengths", "[url][url_host]")
{
    const std::string label63(63, 'a');
    CHECK(ok("http://" + label63 + ".test/").host == label63 + ".test");
    CHECK(bad("http://" + label63 + "a.test/") == "URL host has a label longer than 63 bytes");
    // 4 labels of 63 and dots: 255 bytes; 3 of 63 and one of 61: 253.
    const std::string host253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
    CHECK(ok("http://" + host253 + "/").host == host253);
    CHECK(ok("http://" + host253 + "./").host == host253);
    CHECK(bad("http://" + host253 + "b/") == "URL host is longer than 253 bytes");
}

TEST_CASE("check_url refuses empty labels and labels with a hyphen at either end", "[url][url_host]")
{
    for (const std::string in : {"http://a..b/", "http://.a.test/", "http://a.test../", "http://./", "http://../"}) {
        CHECK(bad(in).find("empty label") != std::string::npos);
    }
    for (const std::string in : {"http://-a.test/", "http://a-.test/", "http://a.-b-.test/", "http://a.test-/"}) {
        CHECK(bad(in) == "URL host has a label that starts or ends with '-'");
    }
    CHECK(ok("http://a-b.c--d.test/").host == "a-b.c--d.test");
    CHECK(ok("http://_dmarc.a_b.test/").host == "_dmarc.a_b.test");
}

TEST_CASE("check_url drops the trailing root dot of a host", "[url][url_host]")
{
    CHECK(ok("http://Example.COM./a").url == "http://example.com/a");
    CHECK(ok("http://example.com.:8080/").url == "http://example.com:8080/");
    CHECK(ok("http://b\xc3\xbc" "cher.example./").url == "http://xn--bcher-kva.example/");
}

TEST_CASE("check_url accepts only dotted-quad IPv4 for hosts that end in a number", "[url][url_host]")
{
    CHECK(ok("http://1.2.3.4/").host == "1.2.3.4");
    CHECK(ok("http://255.255.255.255:8080/").url == "http://255.255.255.255:8080/");
    // Full-width digits and dot map to ASCII, and then are an address like any other.
    CHECK(ok("http://\xef\xbc\x91\xef\xbc\x8e\xef\xbc\x92.3.4/").url == "http://1.2.3.4/");
    // A number in any label but the last is a name.
    CHECK(ok("http://123.test/").host == "123.test");
    CHECK(ok("http://1.2.3.4.test/").host == "1.2.3.4.test");
    CHECK(ok("http://0x7f.test/").host == "0x7f.test");
    CHECK(ok("http://1.2.3.4./x").url == "http://1.2.3.4/x");
    for (const std::string in : {"http://999.1.1.1/", "http://1.2.3/", "http://1.2.3.4.5/", "http://256.0.0.1/",
                                 "http://2130706433/", "http://0x7f000001/", "http://0x7f.0.0.1/", "http://01.2.3.4/",
                                 "http://a.123/"}) {
        CHECK(bad(in).find("not an IPv4 address") != std::string::npos);
    }
}

TEST_CASE("check_url validates IPv6 literals and writes them canonically", "[url][url_host]")
{
    CHECK(ok("http://[::1]:8000/a").url == "http://[::1]:8000/a");
    CHECK(ok("http://[::1]/").host == "[::1]");
    CHECK(ok("http://[2001:DB8::A]/").url == "http://[2001:db8::a]/");
    CHECK(ok("http://[2001:db8:0:0:0:0:0:1]:443/").url == "http://[2001:db8::1]:443/");
    CHECK(ok("https://[::FFFF:1.2.3.4]/").host == "[::ffff:1.2.3.4]");
    for (const std::string in : {"http://[1.2.3.4]/", "http://[gg::1]/", "http://[]/", "http://[::1::2]/",
                                 "http://[fe80::1%25eth0]/"}) {
        CHECK(bad(in) == "URL host is not a valid IPv6 address");
    }
    CHECK(bad("http://[::1/").find("unterminated") != std::string::npos);
}

TEST_CASE("normalise_host is what check_url stores as ValidUrl host", "[url][url_host]")
{
    CHECK(normalise_host("B\xc3\x9c" "CHER.example.").host == std::optional<std::string>("xn--bcher-kva.example"));
    CHECK(normalise_host("a..b").error == "URL host has an empty label (two dots in a row, or a leading dot)");
    // Each host through check_url: a host it accepts is stored exactly as
    // normalise_host spells it (in ValidUrl::host and in the URL), one it refuses
    // is refused with normalise_host's reason. The spellings differ from their
    // normal form, so a check_url that stored the host as written would fail.
    for (const std::string host : {"B\xc3\x9c" "CHER.example.", "Example.COM", "example.com.", "1.2.3.4.",
                                   "[2001:DB8:0:0:0:0:0:1]", "[::FFFF:1.2.3.4]", "XN--BCHER-KVA.Example"}) {
        INFO(host);
        const auto expected = normalise_host(host);
        REQUIRE(expected.host);
        CHECK(*expected.host != host);
        const auto v = ok("http://" + host + ":8080/p");
        CHECK(v.host == *expected.host);
        CHECK(v.url == "http://" + *expected.host + ":8080/p");
    }
    for (const std::string& host : {std::string("a..b"), std::string("-a.example"), std::string("999.1.1.1"),
                                   std::string("[gg::1]"), std::string(64, 'a') + ".example"}) {
        INFO(host);
        const auto expected = normalise_host(host);
        REQUIRE_FALSE(expected.host);
        REQUIRE_FALSE(expected.error.empty());
        CHECK(bad("http://" + host + "/") == expected.error);
    }
}
