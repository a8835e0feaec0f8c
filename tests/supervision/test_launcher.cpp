#include "tests/supervision/supervision_fixture.hpp"
#include "tests/support/skip_test.hpp"

#include "common/supervision/launcher.hpp"
#include "common/base/random_id.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <sys/wait.h>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

namespace {

// The cgroup2 path of a process, as /proc/<pid>/cgroup's "0::" line gives it.
std::string cgroup2_of(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) == 0) {
            return line.substr(3);
        }
    }
    return {};
}

bool ends_with(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A spawn of argv in the fixture's directory, into `leaf`, logs named after `name`.
SpawnSpec spec_for(const SupervisionFixture& fx, const CgroupLeaf& leaf, std::vector<std::string> argv,
                   const std::string& name)
{
    SpawnSpec spec;
    spec.argv = std::move(argv);
    spec.envp = {"PATH=/usr/bin:/bin"};
    spec.pwd = fx.dir;
    spec.stdout_path = fx.dir / (name + ".out");
    spec.stderr_path = fx.dir / (name + ".err");
    spec.cgroup_dir_fd = leaf.dir_fd();
    spec.cgroup_procs_fd = leaf.procs_fd();
    return spec;
}

} // namespace

TEST_CASE("clone3 into a cgroup2 leaf: born inside - exec failures are values", "[launcher]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    if (sup.containment_mode() != ContainmentMode::cgroup2) {
        skip_test("no cgroup2 containment on this machine: the clone3 path cannot be exercised");
    }
    auto leaf = sup.containment().create_leaf(sup.self_row_id(), random_uuid());

    SECTION("a child is born inside its leaf and its first fork stays there")
    {
        // The child forks at once: the grandchild must be in the leaf too.
        auto spawned = spawn_process(spec_for(fx, leaf, {"/bin/sh", "-c", "sleep 30 & exec sleep 30"}, "launch"));
        REQUIRE(std::holds_alternative<Spawned>(spawned));
        auto& child = std::get<Spawned>(spawned);
        const pid_t pid = child.pidfd.pid();
        // Kernels since 5.7 have CLONE_INTO_CGROUP; the vfork fallback joins before exec.
        CHECK(child.cgroup_entry == CgroupEntry::at_birth);
        const std::string leaf_name = leaf.path().filename().string();
        CHECK(ends_with(cgroup2_of(pid), "/" + leaf_name));
        CHECK(eventually([&] { return leaf.members().size() == 2; }, 5s));
        leaf.kill();
        siginfo_t info{};
        REQUIRE(::waitid(P_PIDFD, static_cast<id_t>(child.pidfd.fd()), &info, WEXITED) == 0);
        CHECK(info.si_status == SIGKILL);
        CHECK(eventually([&] { return !leaf.populated(); }, 5s));
        // The orphaned grandchild was reparented to us (the supervisor is a subreaper).
        CHECK(eventually([] { return ::waitpid(-1, nullptr, WNOHANG) > 0; }, 5s));
        CHECK(zombie_children() == 0);
        CHECK(leaf.remove());
    }

    SECTION("an exec failure is a value and leaves no zombie")
    {
        auto spawned = spawn_process(spec_for(fx, leaf, {(fx.dir / "missing-program").string()}, "missing"));
        REQUIRE(std::holds_alternative<SpawnFailure>(spawned));
        CHECK(std::get<SpawnFailure>(spawned).error == ENOENT);
        CHECK(zombie_children() == 0);
        CHECK_FALSE(leaf.populated());
        CHECK(leaf.remove());
    }
}

TEST_CASE("without a cgroup2 leaf the child joins its v1 freezer cgroup before exec", "[launcher]")
{
    SupervisionFixture fx;
    ::setenv("ORCH_CONTAINMENT", "freezer", 1);
    Supervisor sup(*fx.conn, fx.options(false));
    ::unsetenv("ORCH_CONTAINMENT");
    if (sup.containment_mode() != ContainmentMode::freezer) {
        skip_test("no v1 freezer hierarchy on this machine: the join-before-exec path cannot be exercised");
    }
    auto leaf = sup.containment().create_leaf(sup.self_row_id(), random_uuid());
    CHECK(leaf.dir_fd() < 0);
    auto spawned = spawn_process(spec_for(fx, leaf, {"/bin/sleep", "30"}, "freezer"));
    REQUIRE(std::holds_alternative<Spawned>(spawned));
    auto& child = std::get<Spawned>(spawned);
    CHECK(child.cgroup_entry == CgroupEntry::joined_before_exec);
    const auto members = leaf.members();
    CHECK(std::find(members.begin(), members.end(), child.pidfd.pid()) != members.end());
    leaf.kill();
    siginfo_t info{};
    REQUIRE(::waitid(P_PIDFD, static_cast<id_t>(child.pidfd.fd()), &info, WEXITED) == 0);
    CHECK(info.si_status == SIGKILL);
    CHECK(eventually([&] { return leaf.members().empty(); }, 5s));
    CHECK(leaf.remove());
}

TEST_CASE("a launch's start ticks are those /proc reports - through clone3 and through vfork", "[launcher]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    std::optional<CgroupLeaf> leaf;
    if (sup.containment_mode() == ContainmentMode::cgroup2) {
        leaf = sup.containment().create_leaf(sup.self_row_id(), random_uuid());
    }
    // Enough launches that some straddle a tick and take the /proc path too.
    for (int i = 0; i < 300; ++i) {
        SpawnSpec spec;
        spec.argv = {"/bin/true"};
        spec.envp = {"PATH=/usr/bin:/bin"};
        spec.pwd = fx.dir;
        spec.stdout_path = fx.dir / "ticks.out";
        spec.stderr_path = fx.dir / "ticks.err";
        if (leaf && i % 2 == 0) {
            spec.cgroup_dir_fd = leaf->dir_fd();
            spec.cgroup_procs_fd = leaf->procs_fd();
        }
        auto spawned = spawn_process(spec);
        auto* child = std::get_if<Spawned>(&spawned);
        REQUIRE(child != nullptr);
        // Unreaped (a zombie at most): its stat is still its own.
        const auto stat = read_proc_stat(child->pidfd.pid());
        REQUIRE(stat);
        CHECK(child->start_ticks == stat->start_ticks);
        REQUIRE(eventually([&] { return child->pidfd.try_reap().has_value(); }));
    }
}
