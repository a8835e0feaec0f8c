#include "common/supervision/rerun_script.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>

using namespace orch;
using namespace orch::test;

namespace {

// Runs `script` through popen with `extra` before it ("VAR=value " to pass a
// caller's variable); returns its standard output and sets `status`.
std::string run(const std::filesystem::path& script, const std::string& extra, int& status)
{
    FILE* pipe = ::popen((extra + script.string()).c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
        out += buf;
    }
    status = ::pclose(pipe);
    return out;
}

} // namespace

TEST_CASE("a rerun script is executable and reruns the program with exactly its argv - env and directory - secrets "
          "come from the caller",
          "[rerun_script]")
{
    ScratchDir dir("orch-rerun-");
    const auto work = dir / "work dir";
    std::filesystem::create_directories(work);
    const auto script = dir / "hook.cmd.sh";
    write_rerun_script(script,
                       {"/bin/sh", "-c", "pwd; echo \"$1|$PLAIN|$TOKEN|${HOME:-nohome}\"", "sh", "it's a \"word\" $x"},
                       {{"PLAIN", "a b;c"}, {"TOKEN", "written-out"}}, work, {"TOKEN"});
    struct stat st{};
    REQUIRE(::stat(script.c_str(), &st) == 0);
    CHECK((st.st_mode & S_IXUSR) != 0);

    std::ifstream in(script);
    std::stringstream text;
    text << in.rdbuf();
    CHECK(text.str().find("written-out") == std::string::npos);

    int status = 0;
    const auto out = run(script, "TOKEN=from-caller ", status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(out == work.string() + "\nit's a \"word\" $x|a b;c|from-caller|nohome\n");

    // A file of the same name (a rerun of the row) is replaced, and executable again.
    std::ofstream(script) << "stale, and longer than the next script would be if it were not truncated first\n";
    REQUIRE(::chmod(script.c_str(), 0644) == 0);
    write_rerun_script(script, {"/bin/echo", "again"}, {}, work, {});
    REQUIRE(::stat(script.c_str(), &st) == 0);
    CHECK((st.st_mode & S_IXUSR) != 0);
    CHECK(run(script, "", status) == "again\n");
    CHECK(status == 0);
}
