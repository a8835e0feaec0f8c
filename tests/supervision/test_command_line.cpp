#include "common/supervision/child_environment.hpp"
#include "common/supervision/command_line.hpp"

#include <catch2/catch.hpp>

using namespace orch;
using Argv = std::vector<std::string>;

TEST_CASE("a database URL or password option is redacted in both option forms", "[secrets][argv]")
{
    const Argv in = {"/bin/orchestrator", "--database-url", "postgresql://u:pw@/db?host=/run",
                     "--data-dir",        "/srv/data",      "--database-url=host=/run password=pw",
                     "--api-token",       "abc123",         "--idle-window",
                     "0"};
    const Argv out = redact_command_line(in);
    CHECK(out == Argv{"/bin/orchestrator", "--database-url", "<redacted>", "--data-dir", "/srv/data",
                      "--database-url=<redacted>", "--api-token", "<redacted>", "--idle-window", "0"});
}

TEST_CASE("a URL with user-password userinfo keeps its user but not its password", "[secrets][argv]")
{
    CHECK(redact_command_line({"hook", "--url=https://alice:s3cret@example.com/a@b"}) ==
          Argv{"hook", "--url=https://alice:<redacted>@example.com/a@b"});
    // No userinfo, or a user without a password, or '@' only in the path: unchanged.
    for (const auto* arg : {"--url=https://example.com/", "--url=https://alice@example.com/",
                            "--url=https://example.com/p@q:r", "mailto:x@y"}) {
        CHECK(redact_command_line({"hook", arg}) == Argv{"hook", arg});
    }
}

TEST_CASE("ordinary options and the program name are never touched", "[secrets][argv]")
{
    const Argv in = {"--password-looking-program", "--crawl-id", "c1", "--snapshot-id=s1", "-v", "--", "x"};
    CHECK(redact_command_line(in) == in);
    CHECK(is_secret_option("--database-url"));
    CHECK(is_secret_option("--db-url"));
    CHECK(is_secret_option("--pg-password"));
    CHECK_FALSE(is_secret_option("--crawl-id"));
    CHECK_FALSE(is_secret_option("--data-dir"));
}

TEST_CASE("our own command line is read from /proc and comes back non-empty", "[argv]")
{
    const auto argv = own_command_line();
    REQUIRE_FALSE(argv.empty());
    CHECK(argv[0].find("test_supervision") != std::string::npos);
}

TEST_CASE("secret arguments are overwritten in place - the option name survives", "[secrets][argv]")
{
    std::string a0 = "prog", a1 = "--database-url", a2 = "postgresql://u:pw@/db", a3 = "--database-url=pw",
                a4 = "--crawl-id", a5 = "c1";
    char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), a5.data()};
    hide_secret_arguments(6, argv);
    CHECK(std::string(argv[1]) == "--database-url");
    CHECK(std::string(argv[2]) == std::string(a2.size(), 'x'));
    CHECK(std::string(argv[3]) == "--database-url=xx");
    CHECK(std::string(argv[5]) == "c1");
}
