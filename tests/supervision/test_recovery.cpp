#include "tests/supervision/supervision_fixture.hpp"
#include "tests/support/skip_test.hpp"

#include "common/recorder/process_table.hpp"
#include "common/base/random_id.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

#include <csignal>
#include <fstream>
#include <sstream>

#include <linux/sched.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;

namespace {

pid_t spawn_sentinel()
{
    pid_t pid = 0;
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("300"), nullptr};
    char* const envp[] = {nullptr};
    REQUIRE(posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, envp) == 0);
    return pid;
}

// Starts `sleep 300` with exactly `pid` (needs CAP_SYS_ADMIN): a reused pid.
pid_t spawn_at_pid(pid_t pid)
{
    clone_args args{};
    args.exit_signal = SIGCHLD;
    args.set_tid = reinterpret_cast<std::uintptr_t>(&pid);
    args.set_tid_size = 1;
    const long rc = ::syscall(SYS_clone3, &args, sizeof args);
    if (rc == 0) {
        ::execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    return static_cast<pid_t>(rc);
}

// Inserts, in `tx`, the row of a supervisor (a worker) whose process is gone: a
// pid no process has, on this boot. Returns its id.
std::string insert_dead_supervisor(pqxx::work& tx, const std::string& machine_id)
{
    const auto id = random_uuid();
    tx.exec_params0("INSERT INTO process (id, machine_id, process_type, status, pid, boot_id, start_ticks) "
                    "VALUES ($1, $2, 'worker', 'running', 999999, $3, 1)",
                    id, machine_id, read_boot_id());
    return id;
}

void stop_sentinel(pid_t pid)
{
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0); // may already be reaped by a Supervisor: ECHILD is fine
}

} // namespace

TEST_CASE("crash: a new instance kills every orphaned tree and closes every row", "[recovery]")
{
    const bool fallback = GENERATE(false, true);
    SupervisionFixture fx;
    const pid_t sentinel = spawn_sentinel();

    int out[2];
    REQUIRE(::pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const std::string program = program_path("sup_crash_supervisor").string();
    const std::string programs_dir = program_path("sup_forker").parent_path().string();
    std::vector<std::string> args{program, fx.db.url(), fx.machine.id, fx.scope, fallback ? "1" : "0",
                                  programs_dir, fx.dir.path().string()};
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    pid_t supervisor = 0;
    REQUIRE(posix_spawn(&supervisor, program.c_str(), &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') {
        line += c;
    }
    ::close(out[0]);
    std::istringstream words(line);
    std::string ready, self;
    std::vector<std::string> hooks(3);
    words >> ready >> self >> hooks[0] >> hooks[1] >> hooks[2];
    REQUIRE(ready == "ready");
    std::vector<std::string> cookies;
    for (const auto& h : hooks) {
        cookies.push_back(fx.column(h, "cookie"));
    }
    // The forker's 30 processes and the escaper's grandchild exist before the crash.
    REQUIRE(eventually([&] { return pids_with_cookie(cookies[2]).size() >= 31 && pids_with_cookie(cookies[1]).size() >= 2; }));
    // A hook's running write is deferred (k_write_behind_window): let it land.
    REQUIRE(eventually([&] {
        return std::all_of(hooks.begin(), hooks.end(), [&](const std::string& h) { return fx.column(h, "status") == "running"; });
    }));

    REQUIRE(::kill(supervisor, SIGKILL) == 0);
    REQUIRE(::waitpid(supervisor, nullptr, 0) == supervisor);
    for (const auto& h : hooks) {
        CHECK(fx.column(h, "status") == "running");
    }

    Supervisor recovering(*fx.conn, fx.options(fallback));
    const auto report = recovering.recover(500ms);
    CHECK(report.killed_on_recovery == 3);
    CHECK(report.lost == 1); // the dead supervisor's own row
    for (std::size_t i = 0; i < hooks.size(); ++i) {
        INFO("hook " << i);
        CHECK(fx.column(hooks[i], "status") == "exited");
        CHECK(fx.column(hooks[i], "end_reason") == "killed_on_recovery");
        CHECK(fx.column(hooks[i], "exit_code").empty());
        CHECK(eventually([&] { return pids_with_cookie(cookies[i]).empty(); }, 5s));
    }
    CHECK(fx.column(self, "end_reason") == "lost");
    CHECK(pid_alive(sentinel));
    if (!fallback) {
        CHECK_FALSE(std::filesystem::exists(recovering.containment().group_dir(self)));
    }
    CHECK(eventually([&] { recovering.process_events(); return zombie_children() <= 1; }));
    stop_sentinel(sentinel);
}

TEST_CASE("pid reuse and other boots are never signalled by recovery or teardown", "[recovery]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));

    // A hook whose pid is reused after it died unrecorded (as after a crash).
    const auto hook = sup.launch(fx.request({"sleep", "100"}, "victim"));
    const pid_t old_pid = hook.pid;
    {
        pqxx::work tx(*fx.conn);
        tx.exec0("UPDATE process SET parent_id = NULL WHERE id = " + tx.quote(hook.row_id));
        tx.commit();
    }
    ::kill(old_pid, SIGKILL);
    REQUIRE(eventually([&] { sup.process_events(); return !sup.is_running(hook.row_id); }));
    sup.write_held_exits(); // the exit as recorded, before the row is made to lie
    const pid_t reused = spawn_at_pid(old_pid);
    REQUIRE(reused == old_pid);
    {
        pqxx::work tx(*fx.conn);
        tx.exec0("UPDATE process SET status = 'running', ended_at = NULL, exit_code = NULL, term_signal = NULL,"
                 " end_reason = NULL WHERE id = " + tx.quote(hook.row_id));
        tx.commit();
    }
    // Teardown works on pidfds, so it cannot reach the new process either.
    sup.teardown();

    // Fake rows pointing at a live unrelated process: other start time, other boot.
    const pid_t sentinel = spawn_sentinel();
    const auto start = read_proc_stat(sentinel)->start_ticks;
    std::string dead_parent;
    const auto fake = random_uuid();
    const auto other_boot = random_uuid();
    {
        pqxx::work tx(*fx.conn);
        const auto m = tx.quote(fx.machine.id);
        dead_parent = insert_dead_supervisor(tx, fx.machine.id);
        tx.exec0("INSERT INTO process (id, machine_id, parent_id, process_type, status, pid, boot_id, start_ticks, cookie)"
                 " VALUES (" + tx.quote(fake) + ", " + m + ", " + tx.quote(dead_parent) + ", 'hook', 'running', " +
                 std::to_string(sentinel) + ", " + tx.quote(read_boot_id()) + ", " + std::to_string(start + 7) +
                 ", 'not-the-sentinel')");
        tx.exec0("INSERT INTO process (id, machine_id, process_type, status, pid, boot_id, start_ticks) VALUES (" +
                 tx.quote(other_boot) + ", " + m + ", 'hook', 'running', " + std::to_string(sentinel) +
                 ", 'some-earlier-boot', " + std::to_string(start) + ")");
        tx.commit();
    }
    const auto report = sup.recover(200ms);
    CHECK(report.pid_reused == 2);
    CHECK(report.boot_changed == 1);
    CHECK(fx.column(hook.row_id, "end_reason") == "pid_reused");
    CHECK(fx.column(fake, "end_reason") == "pid_reused");
    CHECK(fx.column(fake, "exit_code").empty());
    CHECK(fx.column(other_boot, "end_reason") == "boot_changed");
    CHECK(fx.column(dead_parent, "end_reason") == "lost");
    CHECK(pid_alive(reused));
    CHECK(pid_alive(sentinel));
    stop_sentinel(reused);
    stop_sentinel(sentinel);
}

namespace {

// Spawns `sh -c script` that first moves itself into the cgroup `leaf_dir`.
pid_t spawn_into_leaf(const std::filesystem::path& leaf_dir, const std::string& script)
{
    std::vector<std::string> args{"sh", "-c", "echo $$ > \"$1\" && exec sh -c \"$2\"", "sh",
                                  (leaf_dir / "cgroup.procs").string(), script};
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) == 0);
    return pid;
}

} // namespace

TEST_CASE("recovery SIGTERMs the members of a dead supervisor's leaf through membership-checked pidfds", "[recovery]")
{
    SupervisionFixture fx;
    const auto containment = Containment::probe(fx.options(false).containment);
    if (!containment.uses_cgroups()) {
        skip_test("no cgroup containment on this machine: recovery by leaf cannot be exercised");
    }
    // A supervisor row whose process is gone.
    const auto dead = [&] {
        pqxx::work tx(*fx.conn);
        auto id = insert_dead_supervisor(tx, fx.machine.id);
        tx.commit();
        return id;
    }();
    {
        // contains(): what recovery checks after opening a member's pidfd.
        auto leaf = containment.create_leaf(dead, random_uuid());
        const pid_t member = spawn_into_leaf(leaf.path(), "exec sleep 300");
        REQUIRE(eventually([&] { return leaf.contains(member); }));
        CHECK_FALSE(leaf.contains(::getpid()));
        leaf.kill();
        REQUIRE(::waitpid(member, nullptr, 0) == member);
        CHECK_FALSE(leaf.contains(member));
    }
    // A leaf of its group whose hook row was never written (a crash between
    // spawn and insert), holding a process that stops on SIGTERM.
    const auto leaf_dir = containment.group_dir(dead) / random_uuid();
    std::filesystem::create_directories(leaf_dir);
    const auto marker = fx.dir / "member.term";
    const auto ready = fx.dir / "member.ready";
    const pid_t pid = spawn_into_leaf(leaf_dir, "trap 'echo term > " + marker.string() + "; exit 0' TERM; touch " +
                                                    ready.string() + "; while :; do sleep 0.05; done");
    REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));

    Supervisor sup(*fx.conn, fx.options(false));
    sup.recover(5000ms);
    CHECK(std::filesystem::exists(marker)); // SIGTERM, not only the SIGKILL after the grace
    CHECK_FALSE(pid_alive(pid));
    CHECK_FALSE(std::filesystem::exists(leaf_dir));
    CHECK_FALSE(std::filesystem::exists(containment.group_dir(dead)));
    stop_sentinel(pid);
}

TEST_CASE("recovery keeps the exit record a live supervisor wrote during its grace", "[recovery]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    std::string dead;                   // a supervisor that is gone
    const auto orphan = random_uuid();  // its hook, found by cookie, torn down by recovery
    const auto judged = random_uuid();  // a live supervisor's hook whose pid is gone: judged lost
    const auto cookie = random_uuid();
    {
        pqxx::work tx(*fx.conn);
        const auto m = tx.quote(fx.machine.id);
        const auto boot = tx.quote(read_boot_id());
        dead = insert_dead_supervisor(tx, fx.machine.id);
        tx.exec0("INSERT INTO process (id, machine_id, parent_id, process_type, status, cookie) VALUES (" +
                 tx.quote(orphan) + ", " + m + ", " + tx.quote(dead) + ", 'hook', 'queued', " + tx.quote(cookie) + ")");
        tx.exec0("INSERT INTO process (id, machine_id, parent_id, process_type, status, pid, boot_id, start_ticks)"
                 " VALUES (" + tx.quote(judged) + ", " + m + ", " + tx.quote(sup.self_row_id()) +
                 ", 'hook', 'running', 999999, " + boot + ", 1)");
        tx.commit();
    }
    // The orphan, on SIGTERM, records the judged row's exit the way its
    // supervisor would: after recovery read the rows, before it closes them.
    // Its psql ignores SIGTERM (inherited across exec): recovery's SIGTERM sweep
    // makes further passes for processes forked meanwhile, and on a fast machine
    // it found the psql the trap had just started and stopped it before its write.
    const auto ready = fx.dir / "orphan.ready";
    const std::string sql = "UPDATE process SET status = 'exited', exit_code = 0, end_reason = 'exited',"
                            " ended_at = now() WHERE id = '" + judged + "'";
    std::vector<std::string> args{"sh", "-c",
                                  "url=$1; sql=$2; trap 'trap \"\" TERM; psql -X -q \"$url\" -c \"$sql\" > /dev/null; exit 0' TERM;"
                                  " touch \"$3\"; while :; do sleep 0.05; done",
                                  "sh", fx.db.url(), sql, ready.string()};
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<std::string> env_strings{"ORCH_PROCESS_COOKIE=" + cookie};
    for (char** e = environ; *e; ++e) {
        env_strings.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env_strings) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), envp.data()) == 0);
    REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));

    const auto report = sup.recover(10000ms);
    CHECK(fx.column(judged, "status") == "exited");
    CHECK(fx.column(judged, "exit_code") == "0");
    CHECK(fx.column(judged, "end_reason") == "exited");
    CHECK(std::find(report.closed_rows.begin(), report.closed_rows.end(), judged) == report.closed_rows.end());
    CHECK(report.lost == 1); // the dead supervisor's own row only
    CHECK(report.killed_on_recovery == 1);
    CHECK(fx.column(orphan, "end_reason") == "killed_on_recovery");
    CHECK(fx.column(dead, "end_reason") == "lost");
    CHECK_FALSE(pid_alive(pid));
    stop_sentinel(pid);
}

TEST_CASE("recovery credits a reused leaf's member to the row of its cookie - not to the exited hook the leaf was "
          "made for",
          "[recovery]")
{
    SupervisionFixture fx;
    const auto containment = Containment::probe(fx.options(false).containment);
    if (!containment.uses_cgroups()) {
        skip_test("no cgroup containment on this machine: recovery by leaf cannot be exercised");
    }
    // A dead supervisor left two hook rows, as a crash leaves them: `first` ran in
    // the leaf named after it and exited (its exit was held, so the row still says
    // running and names the leaf); `second` was launched into the same, reused leaf
    // and its row does not name it yet (its running write was held too).
    const auto first = random_uuid();
    const auto second = random_uuid();
    const auto second_cookie = random_uuid();
    std::filesystem::path leaf_dir;
    std::string dead;
    {
        pqxx::work tx(*fx.conn);
        const auto m = tx.quote(fx.machine.id);
        const auto boot = tx.quote(read_boot_id());
        dead = insert_dead_supervisor(tx, fx.machine.id);
        leaf_dir = containment.group_dir(dead) / first;
        std::filesystem::create_directories(leaf_dir);
        // Made first, as it was: recovery reaches its row, and so the leaf, first.
        tx.exec0("INSERT INTO process (id, machine_id, parent_id, process_type, status, pid, boot_id, start_ticks, "
                 "cookie, cgroup_path, created_at) VALUES (" + tx.quote(first) + ", " + m + ", " + tx.quote(dead) +
                 ", 'hook', 'running', 999998, " + boot + ", 1, " + tx.quote(random_uuid()) + ", " +
                 tx.quote(leaf_dir.string()) + ", now() - interval '1 second')");
        tx.exec0("INSERT INTO process (id, machine_id, parent_id, process_type, status, cookie) VALUES (" +
                 tx.quote(second) + ", " + m + ", " + tx.quote(dead) + ", 'hook', 'queued', " +
                 tx.quote(second_cookie) + ")");
        tx.commit();
    }
    const auto ready = fx.dir / "second.ready";
    const pid_t pid = spawn_into_leaf(leaf_dir, "exec env ORCH_PROCESS_COOKIE=" + second_cookie + " sh -c 'touch " +
                                                    ready.string() + "; exec sleep 300'");
    REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));
    REQUIRE(eventually([&] { return read_environ_value(pid, k_cookie_env_var) == second_cookie; }));

    Supervisor sup(*fx.conn, fx.options(false));
    const auto report = sup.recover(5000ms);
    CHECK_FALSE(pid_alive(pid));
    CHECK(fx.column(second, "end_reason") == "killed_on_recovery");
    CHECK(fx.column(first, "end_reason") == "lost");
    CHECK(fx.column(dead, "end_reason") == "lost");
    CHECK(report.killed_on_recovery == 1);
    CHECK_FALSE(std::filesystem::exists(leaf_dir));
    stop_sentinel(pid);
}

TEST_CASE("a destroyed supervisor stops what a dead worker's hooks left adopted by it - nothing else", "[recovery]")
{
    SupervisionFixture fx;
    const pid_t sentinel = spawn_sentinel(); // our child too, outside the scope: left alone
    const std::string programs_dir = program_path("sup_forker").parent_path().string();
    std::vector<std::string> hooks(3);
    std::vector<std::string> cookies;
    {
        auto options = fx.options(false);
        options.teardown_grace = 1s;
        Supervisor sup(*fx.conn, options);
        if (!sup.containment().uses_cgroups()) {
            stop_sentinel(sentinel);
            skip_test("no cgroup containment on this machine: adopted processes are left to recovery");
        }
        // A worker: a supervisor of its own, with a deaf hook, an escaper and a
        // forker. It dies of the teardown's SIGTERM without tearing anything
        // down, as a SIGKILLed worker would: its hooks are reparented to us.
        auto worker = fx.request({program_path("sup_crash_supervisor").string(), fx.db.url(), fx.machine.id,
                                  fx.scope, "0", programs_dir, fx.dir.path().string()},
                                 "worker");
        const auto launched = sup.launch(worker);
        REQUIRE(launched.started());
        std::string line;
        REQUIRE(eventually([&] {
            for (const auto& entry : std::filesystem::directory_iterator(fx.dir.path() / "logs")) {
                std::ifstream in(entry.path());
                for (std::string l; std::getline(in, l);) {
                    if (l.rfind("ready ", 0) == 0) {
                        line = l;
                        return true;
                    }
                }
            }
            return false;
        }));
        std::istringstream words(line);
        std::string ready, self;
        words >> ready >> self >> hooks[0] >> hooks[1] >> hooks[2];
        for (const auto& h : hooks) {
            cookies.push_back(fx.column(h, "cookie"));
        }
        REQUIRE(eventually([&] {
            return pids_with_cookie(cookies[2]).size() >= 31 && pids_with_cookie(cookies[1]).size() >= 2 &&
                   !pids_with_cookie(cookies[0]).empty();
        }));
    }
    // Before, the teardown ended with the worker's own leaf empty, and its
    // hooks (one deaf to SIGTERM, one escaped by a double fork, one with 30
    // children) ran on in their leaves until a recovery pass found them.
    for (std::size_t i = 0; i < cookies.size(); ++i) {
        INFO("hook " << i);
        CHECK(pids_with_cookie(cookies[i]).empty());
    }
    CHECK(pid_alive(sentinel));
    CHECK(zombie_children() <= 1); // the sentinel's, once stopped
    stop_sentinel(sentinel);
}
