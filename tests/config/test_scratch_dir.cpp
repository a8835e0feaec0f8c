#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

using namespace orch::test;
namespace fs = std::filesystem;

namespace {

// Sets or unsets ORCH_KEEP_TEST_DIRS for one scope (whatever the caller's shell has).
class KeepDirsEnv {
public:
    explicit KeepDirsEnv(bool keep)
    {
        if (const char* v = std::getenv("ORCH_KEEP_TEST_DIRS")) {
            m_saved = v;
        }
        if (keep) {
            ::setenv("ORCH_KEEP_TEST_DIRS", "1", 1);
        } else {
            ::unsetenv("ORCH_KEEP_TEST_DIRS");
        }
    }
    ~KeepDirsEnv()
    {
        if (m_saved) {
            ::setenv("ORCH_KEEP_TEST_DIRS", m_saved->c_str(), 1);
        } else {
            ::unsetenv("ORCH_KEEP_TEST_DIRS");
        }
    }
    KeepDirsEnv(const KeepDirsEnv&) = delete;
    KeepDirsEnv& operator=(const KeepDirsEnv&) = delete;

private:
    std::optional<std::string> m_saved;
};

} // namespace

TEST_CASE("a scratch dir is fresh under TMPDIR (else /tmp) and goes with its contents - locked subdirectories included",
          "[scratch]")
{
    KeepDirsEnv env(false);
    ScratchDir outside("orch-sdo-");
    std::ofstream(outside / "keep.txt") << "x";
    fs::path path;
    {
        ScratchDir dir("orch-sd-");
        path = dir.path();
        const char* tmpdir = std::getenv("TMPDIR");
        CHECK(path.parent_path() == fs::path(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp"));
        CHECK(path.filename().string().rfind("orch-sd-", 0) == 0);
        REQUIRE(fs::is_directory(path));
        fs::create_directories(dir / "a" / "b");
        std::ofstream(dir / "a" / "b" / "f") << "x";
        fs::permissions(dir / "a" / "b", fs::perms::none);
        fs::permissions(dir / "a", fs::perms::none);
        fs::permissions(outside.path(), fs::perms::owner_read | fs::perms::owner_exec);
        // A link out of the tree: neither followed for permissions nor removed through.
        fs::create_directory_symlink(outside.path(), dir / "link");
    }
    CHECK_FALSE(fs::exists(path));
    CHECK(fs::exists(outside / "keep.txt"));
    CHECK((fs::status(outside.path()).permissions() & fs::perms::owner_write) == fs::perms::none);
}

TEST_CASE("a moved scratch dir is removed once - by its last owner", "[scratch]")
{
    KeepDirsEnv env(false);
    ScratchDir first("orch-sd-");
    const fs::path path = first.path();
    {
        ScratchDir second(std::move(first));
        CHECK(first.path().empty());
        CHECK(second.path() == path);
        ScratchDir third("orch-sd-");
        const fs::path replaced = third.path();
        third = std::move(second);
        CHECK_FALSE(fs::exists(replaced)); // assignment removed what `third` owned
        CHECK(fs::exists(path));
    }
    CHECK_FALSE(fs::exists(path));
}

TEST_CASE("ORCH_KEEP_TEST_DIRS and release() keep the directory", "[scratch]")
{
    fs::path kept;
    fs::path released;
    {
        KeepDirsEnv env(true);
        ScratchDir dir("orch-sd-");
        kept = dir.path();
    }
    {
        KeepDirsEnv env(false);
        ScratchDir dir("orch-sd-");
        released = dir.release();
        CHECK(dir.path().empty());
    }
    CHECK(fs::is_directory(kept));
    CHECK(fs::is_directory(released));
    std::error_code ec;
    fs::remove(kept, ec);
    fs::remove(released, ec);
}

TEST_CASE("a scratch dir that cannot be made is a system_error", "[scratch]")
{
    CHECK_THROWS_AS(ScratchDir("no-such-dir/x"), std::system_error);
}
