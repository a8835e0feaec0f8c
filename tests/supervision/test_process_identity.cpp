#include "common/db/machine.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/process_identity.hpp"

#include "tests/support/scratch_dir.hpp"
#include "tests/support/skip_test.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace orch;
using namespace orch::test;

namespace {

pid_t spawn_sleep()
{
    pid_t pid = 0;
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("100"), nullptr};
    char* const envp[] = {const_cast<char*>("ORCH_PROCESS_COOKIE=abc"), nullptr};
    REQUIRE(posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, envp) == 0);
    return pid;
}

} // namespace

TEST_CASE("identity of a live process verifies - a changed start time is reuse", "[identity]")
{
    const pid_t pid = spawn_sleep();
    auto pidfd = Pidfd::open(pid);
    REQUIRE(pidfd);
    const auto boot = read_boot_id();
    const auto identity = capture_identity(*pidfd, boot, std::string("abc"));
    REQUIRE(identity);
    CHECK(identity->start_ticks > 0);
    // Until the child has called exec, /proc shows the environment it inherited from us.
    std::optional<std::string> cookie;
    for (int i = 0; i < 500 && cookie != std::string("abc"); ++i) {
        cookie = read_environ_value(pid, k_cookie_env_var);
        if (cookie != std::string("abc")) {
            ::usleep(10'000);
        }
    }
    CHECK(cookie == std::string("abc"));

    CHECK(verify_identity(*identity, boot).verdict == IdentityVerdict::same);
    auto wrong_ticks = *identity;
    wrong_ticks.start_ticks -= 1;
    CHECK(verify_identity(wrong_ticks, boot).verdict == IdentityVerdict::reused);
    auto wrong_cookie = *identity;
    wrong_cookie.pidfs_ino = std::nullopt;
    wrong_cookie.cookie = "other";
    CHECK(verify_identity(wrong_cookie, boot).verdict == IdentityVerdict::reused);
    CHECK(verify_identity(*identity, "another-boot").verdict == IdentityVerdict::boot_changed);

    REQUIRE(pidfd->send_signal(SIGKILL));
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(verify_identity(*identity, boot).verdict == IdentityVerdict::gone);
    CHECK_FALSE(pidfd->send_signal(SIGTERM)); // ESRCH through the old pidfd, never another process
}

TEST_CASE("start ticks between two clock readings: the tick when both are in it - none across a boundary",
          "[identity]")
{
    const std::int64_t tick = 1'000'000'000 / ::sysconf(_SC_CLK_TCK);
    CHECK(start_ticks_between(5 * tick, 5 * tick) == 5u);
    CHECK(start_ticks_between(5 * tick, 6 * tick - 1) == 5u);
    CHECK(start_ticks_between(5 * tick + 1, 5 * tick + 2) == 5u);
    CHECK_FALSE(start_ticks_between(6 * tick - 1, 6 * tick));
    CHECK_FALSE(start_ticks_between(6 * tick, 6 * tick - 1)); // the clock does not go back
    // Our own start, read now, is not in the future of the clock.
    const auto self = read_proc_stat(::getpid());
    REQUIRE(self);
    CHECK(self->start_ticks <= static_cast<std::uint64_t>(boottime_ns() / tick));
}

TEST_CASE("a pidfs inode that differs from the recorded one is reuse - even without a cookie", "[identity]")
{
    const pid_t pid = spawn_sleep();
    auto pidfd = Pidfd::open(pid);
    REQUIRE(pidfd);
    const auto boot = read_boot_id();
    const auto identity = capture_identity(*pidfd, boot, std::nullopt);
    REQUIRE(identity);
    if (!identity->pidfs_ino) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        skip_test("this kernel has no pidfs (before Linux 6.9): identity rests on start time and cookie");
    }
    CHECK(verify_identity(*identity, boot).verdict == IdentityVerdict::same);
    auto wrong_inode = *identity;
    wrong_inode.pidfs_ino = *identity->pidfs_ino + 1;
    CHECK(verify_identity(wrong_inode, boot).verdict == IdentityVerdict::reused);
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, nullptr, 0) == pid);
}

TEST_CASE("proc stat parsing reads the fields after a command name holding ')' - spaces and a newline",
          "[identity]")
{
    // The command name (comm) is the executable's base name, cut to 15 bytes: a
    // link with a hostile name to /bin/sleep gives a child whose stat line reads
    // "PID (x) (y\nz ) S PPID PGID ...". Parsing from the first ')' would read
    // the wrong fields; the identity of every recorded process rests on them.
    ScratchDir dir("odd-comm");
    const auto link = dir.path() / "x) (y\nz ) S 1";
    std::filesystem::create_symlink("/bin/sleep", link);
    const std::string name = link.string();
    pid_t pid = 0;
    char* const argv[] = {const_cast<char*>(name.c_str()), const_cast<char*>("100"), nullptr};
    char* const envp[] = {nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP); // its own group: pgid == pid, unlike ours
    REQUIRE(posix_spawn(&pid, name.c_str(), nullptr, &attr, argv, envp) == 0);
    posix_spawnattr_destroy(&attr);
    // Until exec, comm is ours; wait for the child's own.
    std::string comm;
    for (int i = 0; i < 500 && comm.find(')') == std::string::npos; ++i) {
        std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
        std::getline(in, comm, '\0');
        if (comm.find(')') == std::string::npos) {
            ::usleep(10'000);
        }
    }
    REQUIRE(comm.find(')') != std::string::npos);
    REQUIRE(comm.find('\n') != std::string::npos);
    const auto stat = read_proc_stat(pid);
    REQUIRE(stat);
    CHECK(stat->ppid == ::getpid());
    CHECK(stat->pgid == pid);
    CHECK((stat->state == 'S' || stat->state == 'R')); // asleep, or not yet
    CHECK(stat->start_ticks > 0);
    const auto self = read_proc_stat(::getpid());
    REQUIRE(self);
    CHECK(stat->start_ticks >= self->start_ticks);
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, nullptr, 0) == pid);
    CHECK_FALSE(read_proc_stat(pid));
}
