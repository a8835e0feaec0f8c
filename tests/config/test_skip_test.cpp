#include "tests/support/command_runner.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/skip_test.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace orch::test;

// Hidden: run only as a child of the test below.
TEST_CASE("skip probe", "[.skip_probe]")
{
    skip_test("the probe's reason");
}

TEST_CASE("a skipped test exits 77 and leaves its name and reason in ORCH_SKIP_LOG", "[skip]")
{
    ScratchDir dir("orch-skip-");
    const auto log = dir.path() / "skipped.txt";
    const auto self = std::filesystem::read_symlink("/proc/self/exe");
    auto r = run_command({self.string(), "[.skip_probe]"}, {{"ORCH_SKIP_LOG", log.string()}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == k_skip_exit_code);
    CHECK_THAT(r.err, Catch::Contains("SKIPPED: skip probe: the probe's reason"));
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    CHECK(text.str() == "SKIPPED: skip probe: the probe's reason\n");
    // Without the variable the skip still shows, on stderr and in the exit code.
    auto bare = run_command({self.string(), "[.skip_probe]"}, {{"ORCH_SKIP_LOG", ""}});
    CHECK(bare.exit_code == k_skip_exit_code);
    CHECK_THAT(bare.err, Catch::Contains("SKIPPED: skip probe"));
}
