#include "common/base/bounded_json.hpp"
#include "common/base/json_text.hpp"
#include "common/base/utf8.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace orch;

TEST_CASE("hooks: find_invalid_utf8 accepts well-formed text and pinpoints bad bytes", "[hooks][utf8]")
{
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8("plain ascii"));
    CHECK(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
    CHECK(find_invalid_utf8("ab\xFFz") == std::optional<std::size_t>(2));
    CHECK(find_invalid_utf8("\xC0\xAF") == std::optional<std::size_t>(0));        // overlong '/'
    CHECK(find_invalid_utf8("x\xED\xA0\x80") == std::optional<std::size_t>(1));   // surrogate U+D800
    CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == std::optional<std::size_t>(0)); // > U+10FFFF
    CHECK(find_invalid_utf8("ok\xE2\x82") == std::optional<std::size_t>(2));      // truncated
}

TEST_CASE("hooks: sanitize_utf8 replaces each bad byte and keeps the rest", "[hooks][utf8]")
{
    CHECK(sanitize_utf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
    CHECK(sanitize_utf8("caf\xC3\xA9") == "caf\xC3\xA9");
    CHECK(is_valid_utf8(sanitize_utf8("\xC3\x28\xE2\x28\xA1\xF0")));
}

TEST_CASE("hooks: json_nesting_depth ignores brackets inside strings", "[hooks][json]")
{
    CHECK(json_nesting_depth("1") == 0);
    CHECK(json_nesting_depth(R"({"a":[1,{"b":2}]})") == 3);
    CHECK(json_nesting_depth(R"({"a":"[[[[{{{{"})") == 1);
    CHECK(json_nesting_depth(R"({"a":"\"[[[["})") == 1);
}

TEST_CASE("hooks: parse_bounded_json rejects deep nesting before nlohmann sees it", "[hooks][json]")
{
    std::string deep = std::string(100000, '[') + std::string(100000, ']');
    CHECK_THROWS_WITH(parse_bounded_json(deep), Catch::Contains("nesting deeper than 64"));
    std::string ok = std::string(64, '[') + std::string(64, ']');
    CHECK(parse_bounded_json(ok).is_array());
}

TEST_CASE("hooks: parse_bounded_json reports invalid UTF-8 and syntax errors as clean text", "[hooks][json]")
{
    CHECK_THROWS_WITH(parse_bounded_json("{\"a\":\"\xFF\"}"), Catch::Contains("invalid UTF-8 at byte 7"));
    try {
        parse_bounded_json("{\"type\": oops \xC3");
        FAIL("expected JsonInputError");
    } catch (const JsonInputError& e) {
        CHECK(is_valid_utf8(e.what()));
    }
    try {
        parse_bounded_json("{\"type\": \"x\", " + std::string(5000, 'z'));
        FAIL("expected JsonInputError");
    } catch (const JsonInputError& e) {
        CHECK(std::string(e.what()).size() < 400);
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
}

namespace {

std::string lenient_dump(const std::string& text)
{
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string written(std::string_view text)
{
    std::string out = "prefix:";
    json_text::append_string(out, text);
    REQUIRE(out.rfind("prefix:", 0) == 0); // appends, keeps what was there
    return out.substr(7);
}

} // namespace

TEST_CASE("hooks: json_text writes a string exactly as nlohmann's lenient dump does", "[hooks][json]")
{
    std::vector<std::string> samples = {"", "plain", "a\"b\\c/d", "tab\there\nnew\rret\bback\fform", "\x7f del",
                                        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "ab\xFFz", "\xC0\xAF",
                                        "x\xED\xA0\x80", "\xF4\x90\x80\x80", "ok\xE2\x82", "\x80lead",
                                        "\xC3\xA9\xFF\xC3\xA9", std::string("nul\0inside", 10)};
    for (int c = 0; c < 0x20; ++c) {
        samples.push_back(std::string("[") + static_cast<char>(c) + "]");
    }
    for (const auto& s : samples) {
        INFO("sample of " << s.size() << " bytes");
        CHECK(written(s) == lenient_dump(s));
    }
    // Random byte strings, mostly printable ASCII with some control and high
    // bytes, from a fixed seed.
    std::mt19937 random(12345);
    for (int n = 0; n < 20000; ++n) {
        std::string s(random() % 40, '\0');
        for (auto& c : s) {
            const auto r = random() % 10;
            // Mostly plain, so that the 8-byte runs of the fast path come up.
            c = static_cast<char>(r < 8 ? 0x20 + random() % 0x5f : r < 9 ? random() % 0x20 : 0x80 + random() % 0x80);
        }
        INFO("random sample " << n);
        REQUIRE(written(s) == lenient_dump(s));
    }
}

TEST_CASE("hooks: json_text writes arrays and objects and numbers that read back as given", "[hooks][json]")
{
    const std::vector<std::string> argv = {"/bin/hook", "--url=https://example.com/?a=\"1\"", ""};
    std::string array;
    json_text::append_string_array(array, argv);
    CHECK(nlohmann::json::parse(array) == nlohmann::json(argv));
    CHECK(array == nlohmann::json(argv).dump());

    const std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"}, {"QUOTE\"D", "v\\al\n"}, {"E", ""}};
    std::string object;
    json_text::append_string_object(object, env);
    CHECK(nlohmann::json::parse(object) == nlohmann::json(env));
    CHECK(object == nlohmann::json(env).dump());
    std::string empty;
    json_text::append_string_object(empty, {});
    json_text::append_string_array(empty, {});
    CHECK(empty == "{}[]");

    for (const double x : {0.0, 60.0, 0.25, 1.0 / 3.0, 1e-9, 123456789.125, 1e300}) {
        std::string number;
        json_text::append_number(number, x);
        CHECK(nlohmann::json::parse(number).get<double>() == x);
    }
    std::string special;
    json_text::append_number(special, std::nan(""));
    special += ',';
    json_text::append_number(special, HUGE_VAL);
    CHECK(special == "null,null");

    std::string member;
    json_text::append_key(member, "k\"ey");
    json_text::append_string_or_null(member, std::nullopt);
    CHECK(member == "\"k\\\"ey\":null");
}
