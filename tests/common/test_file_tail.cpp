#include "common/file_tail.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

using namespace orch;
using namespace orch::test;

TEST_CASE("a log's tail: empty or missing logs are empty - others are their last bytes - as any file's tail",
          "[file_tail]")
{
    ScratchDir dir("orch-tail-");
    const auto empty = dir / "empty.log";
    std::ofstream{empty};
    CHECK(read_log_tail(empty, 10).empty());
    CHECK(read_log_tail(dir / "missing.log", 10).empty());

    const auto log = dir / "out.log";
    std::ofstream(log) << "first line\nsecond line\n";
    CHECK(read_log_tail(log, 5) == "line\n");
    CHECK(read_log_tail(log, 1000) == "first line\nsecond line\n");
    CHECK(read_log_tail(log, 7) == read_file_tail(log, 7));

    // A pseudo file reports a size of 0 and has content: only read_file_tail is for those.
    CHECK_FALSE(read_file_tail("/proc/self/stat", 4096).empty());
}
