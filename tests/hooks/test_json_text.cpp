#include "common/bounded_json.hpp"
#include "common/utf8.hpp"

#include <catch2/catch.hpp>

#include <string>

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
