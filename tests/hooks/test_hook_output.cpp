#include "common/hooks/hook_output.hpp"
#include "common/base/utf8.hpp"
#include "tests/hooks/temp_tree.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <cstdio>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace orch;
using orch::test::TempTree;

namespace {

HookOutput parse(std::string_view text, std::size_t chunk = 0)
{
    HookOutputParser parser;
    if (chunk == 0) {
        parser.feed(text);
    } else {
        for (std::size_t i = 0; i < text.size(); i += chunk) {
            parser.feed(text.substr(i, chunk));
        }
    }
    return parser.finish();
}

long max_rss_kib()
{
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

} // namespace

TEST_CASE("hooks: an ArchiveResult record with all fields", "[hooks][output]")
{
    HookOutput out = parse("starting\n"
                           R"({"type":"ArchiveResult","status":"succeeded","output_str":"index.html",)"
                           R"("output_json":{"n":[1,2]},"error":null})"
                           "\ndone\n");
    REQUIRE(out.archive_result);
    CHECK(out.archive_result->status == "succeeded");
    CHECK(out.archive_result->output_str == std::optional<std::string>("index.html"));
    CHECK(out.archive_result->output_json == nlohmann::json{{"n", {1, 2}}});
    CHECK_FALSE(out.archive_result->error);
    CHECK(out.archive_result->line == 2);
    CHECK(out.archive_result_count == 1);
    CHECK(out.errors.empty());
    CHECK(out.lines == 3);
}

TEST_CASE("hooks: whatever the chunking - the result is the same", "[hooks][output]")
{
    std::string text = "log line\r\n  {\"type\":\"Snapshot\",\"url\":\"https://a.example/\"}\r\n"
                       "{\"type\":\"ArchiveResult\",\"status\":\"failed\",\"error\":\"boom\"}";  // no final newline
    for (std::size_t chunk : {0, 1, 2, 3, 7, 64}) {
        INFO("chunk " << chunk);
        HookOutput out = parse(text, chunk);
        REQUIRE(out.archive_result);
        CHECK(out.archive_result->status == "failed");
        CHECK(out.archive_result->error == std::optional<std::string>("boom"));
        REQUIRE(out.discovered.size() == 1);
        CHECK(out.discovered[0].url == "https://a.example/");
        CHECK(out.discovered[0].line == 2);
        CHECK(out.lines == 3);
        CHECK(out.errors.empty());
    }
}

TEST_CASE("hooks: plain text and JSON without a type are log output", "[hooks][output]")
{
    HookOutput out = parse("hello\n{not json at all\n{\"level\":\"info\",\"msg\":\"x\"}\n[1,2]\n{\"type\": 5}\n"
                           "\n   \n\xFF\xFE binary \x00 junk\n");
    CHECK_FALSE(out.archive_result);
    CHECK(out.errors.empty());
    CHECK(out.notes.size() == 1);  // the non-string type
}

TEST_CASE("hooks: two ArchiveResult records fail with a clear error", "[hooks][output]")
{
    HookOutput out = parse("{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}\nx\n"
                           "{\"type\":\"ArchiveResult\",\"status\":\"failed\"}\n");
    CHECK(out.archive_result_count == 2);
    REQUIRE(out.errors.size() == 1);
    CHECK(out.errors[0] == "hook printed 2 ArchiveResult records (lines 1, 3)");
}

TEST_CASE("hooks: invalid JSON that claims to be a record is an error naming the line", "[hooks][output]")
{
    HookOutput out = parse("ok\n{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"\n");
    REQUIRE(out.errors.size() == 1);
    CHECK_THAT(out.errors[0], Catch::StartsWith("line 2: invalid JSON in record"));

    out = parse("{ \"status\": \"x\", \"type\" : \"Snapshot\", }\n");
    REQUIRE(out.errors.size() == 1);
    CHECK_THAT(out.errors[0], Catch::StartsWith("line 1:"));
}

TEST_CASE("hooks: ArchiveResult field validation", "[hooks][output]")
{
    auto first_error = [](std::string line) {
        HookOutput out = parse(line + "\n");
        return out.errors.empty() ? std::string() : out.errors[0];
    };
    CHECK_THAT(first_error(R"({"type":"ArchiveResult","status":"done"})"),
               Catch::Contains("\"status\" must be one of") && Catch::Contains("\"done\""));
    CHECK_THAT(first_error(R"({"type":"ArchiveResult"})"), Catch::Contains("got nothing"));
    CHECK_THAT(first_error(R"({"type":"ArchiveResult","status":"succeeded","output_str":5})"),
               Catch::Contains("\"output_str\" must be a string"));
    CHECK_THAT(first_error(R"({"type":"ArchiveResult","status":"failed","error":["x"]})"),
               Catch::Contains("\"error\" must be a string"));
    CHECK(first_error(R"({"type":"ArchiveResult","status":"noresults","output_json":[1,"a",null]})").empty());
}

TEST_CASE("hooks: Snapshot records: URLs - titles - malformed ones noted", "[hooks][output]")
{
    HookOutput out = parse(R"({"type":"Snapshot","url":"https://a/","title":"A"})"
                           "\n"
                           R"({"type":"Snapshot","url":"https://b/"})"
                           "\n"
                           R"({"type":"Snapshot","title":"Page title"})"
                           "\n"
                           R"({"type":"Snapshot","title":"Later title"})"
                           "\n"
                           R"({"type":"Snapshot","url":42})"
                           "\n"
                           R"({"type":"Snapshot","url":""})"
                           "\n"
                           R"({"type":"Snapshot","url":"https://c/","title":7})"
                           "\n"
                           R"({"type":"Tag","name":"x"})"
                           "\n");
    REQUIRE(out.discovered.size() == 3);
    CHECK(out.discovered[0].url == "https://a/");
    CHECK(out.discovered[0].title == std::optional<std::string>("A"));
    CHECK_FALSE(out.discovered[1].title);
    CHECK(out.discovered[2].url == "https://c/");
    CHECK(out.title == std::optional<std::string>("Later title"));
    CHECK(out.errors.empty());
    CHECK(out.notes.size() == 4);
    CHECK_THAT(out.notes[3], Catch::Contains("unknown type \"Tag\""));
}

TEST_CASE("hooks: overlong URLs and titles are dropped", "[hooks][output]")
{
    std::string long_url = "https://a/" + std::string(k_max_discovered_url_bytes, 'x');
    HookOutput out = parse("{\"type\":\"Snapshot\",\"url\":\"" + long_url + "\"}\n" +
                           "{\"type\":\"Snapshot\",\"title\":\"" + std::string(k_max_title_bytes + 1, 't') + "\"}\n");
    CHECK(out.discovered.empty());
    CHECK_FALSE(out.title);
    CHECK(out.notes.size() == 2);
}

TEST_CASE("hooks: at most 10 - 000 discovered URLs are kept", "[hooks][output]")
{
    HookOutputParser parser;
    for (int i = 0; i < 10050; ++i) {
        parser.feed("{\"type\":\"Snapshot\",\"url\":\"https://e.com/" + std::to_string(i) + "\"}\n");
    }
    HookOutput out = parser.finish();
    CHECK(out.discovered.size() == k_max_discovered_urls);
    CHECK(out.discovered_dropped == 50);
    CHECK(out.discovered.back().url == "https://e.com/9999");
    CHECK(out.notes.size() == 1);
}

TEST_CASE("hooks: hostile input: deep nesting is rejected without recursion", "[hooks][output]")
{
    std::string deep = "{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_json\":" +
                       std::string(500000, '[') + std::string(500000, ']') + "}\n";
    HookOutput out = parse(deep);
    CHECK_FALSE(out.archive_result);
    REQUIRE(out.errors.size() == 1);
    CHECK_THAT(out.errors[0], Catch::Contains("line 1") && Catch::Contains("nesting deeper than 64"));

    // Not claiming to be a record: ignored.
    out = parse("{\"a\":" + std::string(100000, '[') + "\n");
    CHECK(out.errors.empty());
}

TEST_CASE("hooks: hostile input: invalid UTF-8 in a record rejects it", "[hooks][output]")
{
    HookOutput out = parse("{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"a\xC3\x28\"}\n");
    CHECK_FALSE(out.archive_result);
    REQUIRE(out.errors.size() == 1);
    CHECK_THAT(out.errors[0], Catch::Contains("line 1") && Catch::Contains("invalid UTF-8"));
    CHECK(is_valid_utf8(out.errors[0]));

    out = parse("{\"type\":\"Snapshot\",\"url\":\"https://a/\xFF\"}\n");
    CHECK(out.discovered.empty());
    CHECK(out.errors.size() == 1);
}

TEST_CASE("hooks: hostile input: lines over 1 MiB are skipped - records among them still count", "[hooks][output]")
{
    std::string huge(k_max_record_line_bytes + 10, 'x');
    std::string at_limit = "{\"type\":\"Snapshot\",\"title\":\"";
    at_limit += std::string(k_max_record_line_bytes - at_limit.size() - 2, 'y') + "\"}";
    REQUIRE(at_limit.size() == k_max_record_line_bytes);
    std::string text = huge + "\n" + "{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}\n" + huge;
    for (std::size_t chunk : {0, 4096, 65536}) {
        HookOutput out = parse(text, chunk);
        REQUIRE(out.archive_result);
        CHECK(out.archive_result->line == 2);
        CHECK(out.errors.empty());
        CHECK(out.notes.size() == 2);
        CHECK_THAT(out.notes[0], Catch::Contains("line 1: longer than"));
        CHECK(out.lines == 3);
    }
    // Exactly at the limit is still read (the title itself is too long to keep, which is noted).
    HookOutput out = parse(at_limit + "\n");
    CHECK(out.errors.empty());
    CHECK_THAT(out.notes.at(0), Catch::Contains("title longer than"));

    // An overlong line that claims to be a record is an error, not silence.
    out = parse("{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"" + huge + "\"}\n", 65536);
    CHECK_FALSE(out.archive_result);
    REQUIRE(out.errors.size() == 1);
    CHECK_THAT(out.errors[0], Catch::Contains("line 1: record longer than"));
}

TEST_CASE("hooks: errors and notes are capped", "[hooks][output]")
{
    HookOutputParser parser;
    for (int i = 0; i < 300; ++i) {
        parser.feed("{\"type\":\"x\n{\"type\":\"Unknown\"}\n");
    }
    HookOutput out = parser.finish();
    CHECK(out.errors.size() == k_max_output_messages);
    CHECK(out.errors_dropped == 200);
    CHECK(out.notes.size() == k_max_output_messages);
    CHECK(out.notes_dropped == 200);
}

TEST_CASE("hooks: parse_hook_output_file streams a 200 MB log with flat memory", "[hooks][output]")
{
    TempTree t;
    auto path = t.path() / "hook.stdout.log";
    {
        std::ofstream f(path, std::ios::binary);
        std::string block;
        for (int i = 0; i < 1000; ++i) {
            block += std::string(999, 'z') + '\n';
        }
        f << "{\"type\":\"Snapshot\",\"url\":\"https://first/\"}\n";
        for (int i = 0; i < 150; ++i) {  // 150 MB of 1 kB lines
            f << block;
        }
        f << std::string(50 * 1024 * 1024, 'q') << "\n";  // and one 50 MB line
        f << "{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}\n";
    }
    // Parse in a child: its peak RSS starts at our current RSS, not at the
    // peak left behind by earlier tests, so the growth it sees is the parser's.
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        long before = max_rss_kib();
        HookOutput out = parse_hook_output_file(path);
        long growth = max_rss_kib() - before;
        bool ok = out.archive_result && out.discovered.size() == 1 && out.lines == 150000 + 3;
        std::fprintf(stderr, "200 MB parse: peak RSS growth %ld KiB\n", growth);
        ::_exit(!ok ? 1 : growth > 8 * 1024 ? 2 : 0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("hooks: parse_hook_output_file on a missing file throws system_error", "[hooks][output]")
{
    CHECK_THROWS_AS(parse_hook_output_file("/nonexistent/hook.stdout.log"), std::system_error);
}
