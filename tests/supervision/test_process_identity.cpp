#include "common/db/machine.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/process_identity.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace orch;

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
    auto wrong_inode = *identity;
    wrong_inode.pidfs_ino = identity->pidfs_ino.value_or(0) + 1;
    wrong_inode.cookie = std::nullopt;
    if (identity->pidfs_ino) {
        CHECK(verify_identity(wrong_inode, boot).verdict == IdentityVerdict::reused);
    }
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

TEST_CASE("proc stat parsing survives odd command names", "[identity]")
{
    const auto self = read_proc_stat(getpid());
    REQUIRE(self);
    CHECK(self->pgid == getpgrp());
    CHECK(self->ppid == getppid());
    CHECK_FALSE(read_proc_stat(999999));
}
