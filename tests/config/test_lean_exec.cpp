// reexec_without_gnutls_init (common/config/lean_exec.hpp), on a real exec.
#include "common/config/lean_exec.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

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

namespace {

// How many times `argv` loaded a binary of ours: the dynamic loader reports every
// image it starts (LD_DEBUG=files), and a re-exec keeps the variable.
int images_started(const std::vector<std::string>& argv, bool spawned_lean = false)
{
    std::map<std::string, std::string> env{{"LD_DEBUG", "files"}, {"GNUTLS_NO_IMPLICIT_INIT", ""}, {"ORCH_LEAN_EXEC", ""}};
    if (spawned_lean) {
        orch::add_lean_exec_environment(env);
    }
    const auto r = run_command(argv, env);
    INFO(r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
    CHECK(r.exit_code == 4); // the database is unreachable: the command ran past its parse
    const std::string needle = "initialize program: " + argv.front() + "\n";
    int n = 0;
    for (auto at = r.err.find(needle); at != std::string::npos; at = r.err.find(needle, at + 1)) {
        ++n;
    }
    return n;
}

} // namespace

TEST_CASE("lean exec: the orchestrator's run and the workers re-execute lean - a one-shot command runs in its first "
          "image",
          "[lean_exec]")
{
    const std::string unreachable = "host=/nonexistent/socket-dir connect_timeout=2";
    const auto orchestrator = orch::test::bin_path("orchestrator").string();
    const auto crawl_worker = orch::test::bin_path("crawl_worker").string();
    const auto snapshot_worker = orch::test::bin_path("snapshot_worker").string();
    const std::string id = "00000000-0000-4000-8000-000000000001";
    const auto data_dir = std::filesystem::temp_directory_path() / ("lean-exec-" + std::to_string(::getpid()));

    CHECK(images_started({orchestrator, "--database-url", unreachable, "migrate", "--status"}) == 1);
    CHECK(images_started({orchestrator, "--database-url", unreachable, "status"}) == 1);
    CHECK(images_started({orchestrator, "--database-url", unreachable, "--data-dir", data_dir.string()}) == 2);
    CHECK(images_started({crawl_worker, "--database-url", unreachable, "--crawl-id", id}) == 2);
    CHECK(images_started({snapshot_worker, "--database-url", unreachable, "--snapshot-id", id}) == 2);

    // As the orchestrator spawns its workers: lean at once.
    CHECK(images_started({crawl_worker, "--database-url", unreachable, "--crawl-id", id}, true) == 1);
    std::filesystem::remove_all(data_dir);
}
