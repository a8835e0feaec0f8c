#pragma once

#include "common/db/machine.hpp"
#include "common/recorder/supervisor.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace orch::test {

// A scratch database with a machine row, a temp directory and a unique
// cgroup scope, so parallel test processes never share hooks.
struct SupervisionFixture {
    SupervisionFixture();

    SupervisorOptions options(bool fallback) const;
    LaunchRequest request(std::vector<std::string> argv, std::string name = "hook") const;
    // One column of the process row as text ("" for NULL).
    std::string column(const std::string& row_id, const std::string& name) const;

    ScratchDatabase db;
    std::unique_ptr<pqxx::connection> conn;
    MachineIdentity machine;
    ScratchDir dir; // hooks' working and log directory: outlives every Supervisor of the test
    std::string scope;
};

// Polls `condition` until it holds or `timeout` passes; returns its last value.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

// Runs the supervisor's events, as an owner's loop does, until `done` holds
// (false after 10 s); the rows of the trees that ended on their own meanwhile
// are added to `finished`.
bool run_events_until(Supervisor& sup, const std::function<bool()>& done, std::set<std::string>& finished);
// Runs the supervisor's events until every one of `row_ids` has ended on its own.
bool until_finished(Supervisor& sup, const std::set<std::string>& row_ids);
bool until_finished(Supervisor& sup, const std::string& row_id);
bool pid_alive(pid_t pid);                 // exists and is not a zombie
double thread_cpu_seconds();               // user + system CPU of the calling thread (not its children)
int zombie_children();                     // zombies whose parent is this process
int open_fd_count();                       // entries in /proc/self/fd
std::vector<pid_t> pids_with_cookie(const std::string& cookie);

} // namespace orch::test
