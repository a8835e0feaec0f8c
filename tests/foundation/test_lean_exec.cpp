// reexec_without_gnutls_init (common/lean_exec.hpp), on a real exec.
#include "common/lean_exec.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch::test;

namespace {

std::string probe()
{
    return program_path("lean_exec_probe").string();
}

} // namespace

TEST_CASE("lean exec: a process re-executes itself once with GnuTLS's implicit init off - its children never see "
          "the variable",
          "[lean_exec]")
{
    auto r = run_command({probe()}, {{"GNUTLS_NO_IMPLICIT_INIT", ""}, {"ORCH_LEAN_EXEC", ""}});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("starts=2\n") != std::string::npos);
    CHECK(r.out.find("exec_env=yes\n") != std::string::npos); // the image was loaded with it set
    CHECK(r.out.find("getenv=unset\n") != std::string::npos);
    CHECK(r.out.find("marker=unset\n") != std::string::npos);
    CHECK(r.out.find("comm=lean_exec_probe\n") != std::string::npos); // named after the binary, not "exe"
    CHECK(r.out.find("child=unset\n") != std::string::npos);
}

TEST_CASE("lean exec: a variable the user set is left alone", "[lean_exec]")
{
    auto r = run_command({probe()}, {{"GNUTLS_NO_IMPLICIT_INIT", "1"}, {"ORCH_LEAN_EXEC", ""}});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("starts=1\n") != std::string::npos);
    CHECK(r.out.find("getenv=1\n") != std::string::npos);
    CHECK(r.out.find("child=1\n") != std::string::npos);
}

TEST_CASE("lean exec: a worker spawned with the lean environment starts lean at once - its children never see the "
          "variables",
          "[lean_exec]")
{
    std::map<std::string, std::string> env;
    orch::add_lean_exec_environment(env);
    auto r = run_command({probe()}, env);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("starts=1\n") != std::string::npos); // no second exec
    CHECK(r.out.find("getenv=unset\n") != std::string::npos);
    CHECK(r.out.find("marker=unset\n") != std::string::npos);
    CHECK(r.out.find("child=unset\n") != std::string::npos);
}
