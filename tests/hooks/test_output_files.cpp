#include "common/hooks/output_files.hpp"
#include "tests/hooks/temp_tree.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace orch;
using orch::test::TempTree;
namespace fs = std::filesystem;

TEST_CASE("hooks: lists regular files recursively with sizes - sorted", "[hooks][files]")
{
    TempTree t;
    t.write("out/index.html", "12345");
    t.write("out/assets/a.css", "abc");
    t.write("out/assets/deep/er/b.bin", std::string(1000, 'x'));
    t.mkdir("out/empty");
    OutputFiles files = list_output_files(t.path() / "out");
    REQUIRE(files.files.size() == 3);
    CHECK(files.files[0].path == "assets/a.css");
    CHECK(files.files[1].path == "assets/deep/er/b.bin");
    CHECK(files.files[1].size == 1000);
    CHECK(files.files[2].path == "index.html");
    CHECK(files.total_size == 1008);
    CHECK_FALSE(files.truncated);
    CHECK(files.to_json() == nlohmann::json::parse(R"([{"path":"assets/a.css","size":3},
        {"path":"assets/deep/er/b.bin","size":1000},{"path":"index.html","size":5}])"));
}

TEST_CASE("hooks: the worker's own top-level files are excluded", "[hooks][files]")
{
    TempTree t;
    t.write("out/on_Snapshot__10_wget.stdout.log", "x");
    t.write("out/on_Snapshot__10_wget.stderr.log", "x");
    t.write("out/on_Snapshot__10_wget.cmd.sh", "x");
    t.write("out/sub/saved.stdout.log", "x");  // created by the hook, deeper down
    t.write("out/real.txt", "x");
    OutputFiles files = list_output_files(t.path() / "out");
    REQUIRE(files.files.size() == 2);
    CHECK(files.files[0].path == "real.txt");
    CHECK(files.files[1].path == "sub/saved.stdout.log");
    CHECK(is_worker_file_name("a.cmd.sh"));
    CHECK_FALSE(is_worker_file_name("a.sh"));
}

TEST_CASE("hooks: symlinks are never followed and special files are not listed", "[hooks][files]")
{
    TempTree t;
    t.write("secret/passwd", "root:x:0:0");
    t.write("out/file.txt", "hi");
    fs::create_directory_symlink(t.path() / "secret", t.path() / "out/escape_dir");
    fs::create_symlink(t.path() / "secret/passwd", t.path() / "out/escape_file");
    fs::create_symlink("file.txt", t.path() / "out/inside_link");
    ::mkfifo((t.path() / "out/fifo").c_str(), 0644);
    OutputFiles files = list_output_files(t.path() / "out");
    REQUIRE(files.files.size() == 1);
    CHECK(files.files[0].path == "file.txt");

    // The output directory itself replaced by a symlink: refused.
    fs::create_directory_symlink(t.path() / "secret", t.path() / "linked_out");
    CHECK_THROWS_AS(list_output_files(t.path() / "linked_out"), std::system_error);
}

TEST_CASE("hooks: listing stops at the entry cap", "[hooks][files]")
{
    TempTree t;
    for (int i = 0; i < 30; ++i) {
        t.write("out/d" + std::to_string(i % 3) + "/f" + std::to_string(i), "x");
    }
    OutputFiles files = list_output_files(t.path() / "out", 10);
    CHECK(files.files.size() == 10);
    CHECK(files.truncated);
    CHECK(files.total_size == 10);
    CHECK(list_output_files(t.path() / "out", 30).files.size() == 30);
    CHECK_FALSE(list_output_files(t.path() / "out", 30).truncated);
}

TEST_CASE("hooks: very deep trees are cut at the depth limit without running out of fds", "[hooks][files]")
{
    TempTree t;
    std::string rel = "out";
    for (std::size_t i = 0; i < k_max_output_dir_depth + 20; ++i) {
        rel += "/d";
    }
    t.write(rel + "/deep.txt", "x");
    t.write("out/d/shallow.txt", "x");
    OutputFiles files = list_output_files(t.path() / "out");
    REQUIRE(files.files.size() == 1);
    CHECK(files.files[0].path == "d/shallow.txt");
}

TEST_CASE("hooks: non-UTF-8 file names survive into JSON", "[hooks][files]")
{
    TempTree t;
    t.write(std::string("out/bad\xFFname"), "x");
    OutputFiles files = list_output_files(t.path() / "out");
    REQUIRE(files.files.size() == 1);
    CHECK(files.files[0].path == "bad\xFFname");
    CHECK(files.to_json()[0]["path"] == "bad\xEF\xBF\xBDname");
    CHECK_NOTHROW(files.to_json().dump());
}

TEST_CASE("hooks: a missing output directory throws system_error", "[hooks][files]")
{
    TempTree t;
    CHECK_THROWS_AS(list_output_files(t.path() / "missing"), std::system_error);
}
