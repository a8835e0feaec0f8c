#include "common/base/fd.hpp"
#include "common/supervision/file_tail.hpp"
#include "common/supervision/log_bound.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>

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

TEST_CASE("a bounded log: its tail and its kept offset skip the output the bound deallocated - never zeros",
          "[file_tail][log_bound]")
{
    ScratchDir dir("orch-tail-");
    const auto log = dir / "big.log";
    std::string text;
    for (int i = 0; text.size() < 300 * 1024; ++i) {
        text += "line " + std::to_string(i) + " of a log that outgrew its bound\n";
    }
    std::ofstream(log, std::ios::binary) << text;
    const auto punched = bound_log_file(log, 64 * 1024);
    // ext4, xfs, btrfs and tmpfs punch holes; the bound keeps the newest 32 KiB or more.
    REQUIRE(punched > 0);
    REQUIRE(punched <= text.size() - 32 * 1024);
    CHECK(std::filesystem::file_size(log) == text.size());

    Fd fd{::open(log.c_str(), O_RDONLY | O_CLOEXEC)};
    REQUIRE(fd);
    CHECK(next_kept_offset(fd.get(), 0) == punched);
    CHECK(next_kept_offset(fd.get(), punched - 1) == punched);
    CHECK(next_kept_offset(fd.get(), punched + 10) == punched + 10);
    CHECK(next_kept_offset(fd.get(), text.size()) == text.size());
    CHECK(next_kept_offset(fd.get(), text.size() + 5) == text.size() + 5);

    // Asked for more than was kept: what was kept, no '?' standing for zeros.
    CHECK(read_file_tail(log, 1 << 20) == text.substr(punched));
    CHECK(read_log_tail(log, text.size()) == text.substr(punched));
    CHECK(read_file_tail(log, 100) == text.substr(text.size() - 100));

    // A file with no hole (fully allocated) is all kept.
    const auto plain = dir / "plain.log";
    std::ofstream(plain, std::ios::binary) << text;
    Fd plain_fd{::open(plain.c_str(), O_RDONLY | O_CLOEXEC)};
    CHECK(next_kept_offset(plain_fd.get(), 0) == 0);
    CHECK(read_file_tail(plain, 1 << 20) == text);
}
