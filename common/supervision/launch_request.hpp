#pragma once

#include "common/supervision/launcher.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

// What a launch asks for and what becomes of it: the values that pass between
// a process tree's owner and its supervision (ProcessTrees, and the recorder's
// Supervisor on top of it). No database here.
namespace orch {

// What the recorder writes into the process row beside the process itself.
// ProcessTrees carries them without reading them.
struct ProcessLabels {
    std::optional<std::string> plugin;
    std::optional<std::string> hook_name;
    std::optional<std::string> crawl_id;
    std::optional<std::string> snapshot_id;
    std::optional<std::string> archive_result_id;
};

struct LaunchRequest {
    std::vector<std::string> argv;
    // The complete, allow-listed environment of the child: nothing is
    // inherited. Database URLs are dropped; secret-looking values are
    // redacted in the row and in cmd.sh.
    std::map<std::string, std::string> env;
    // Given to the child as they are and never recorded (not in the row, not in
    // cmd.sh): how a worker receives its DATABASE_URL. Never set this for hooks.
    std::map<std::string, std::string> private_env;
    // Row id to use (a UUID); empty = a new random one. Lets a caller lease work to
    // the process row before the process exists. It is the tree's id too.
    std::string row_id;
    std::filesystem::path pwd;     // working directory (must exist)
    std::filesystem::path log_dir; // <name>.<row-id>.{stdout,stderr}.log and .cmd.sh go here; created if missing
    std::string name = "process";  // hook name, used in file names and logs
    std::optional<double> timeout_s;
    // Read by the recorder: "hook" rows are written behind (see Supervisor), a
    // "worker" learns its row id (ORCH_PROCESS_ID).
    std::string process_type = "hook";
    ProcessLabels labels;
    // The owner logs this process's start and end itself, with what it knows
    // of them (a snapshot worker's hooks): the supervisor's own "launched" and
    // "process exited" lines go to debug, and a hook is two lines, not four.
    bool owner_logs = false;
    // Its exit is held like a hook's (Supervisor::take_held_exits) though it is
    // not one: a crawl worker's snapshot workers, whose last exit the crawl's
    // seal carries. The owner writes the held exits itself (write_held_exits)
    // before anything reads the row as a dead process's, such as a recovery pass.
    bool hold_exit = false;
};

struct LaunchResult {
    std::string row_id;
    pid_t pid = 0;
    std::optional<SpawnFailure> failure; // row already closed as spawn_failed
    bool started() const noexcept { return !failure.has_value(); }
};

// Where a process ended, as recorded in its row.
struct ProcessOutcome {
    std::string row_id; // the tree's id (LaunchRequest::row_id)
    std::optional<int> exit_code;
    std::optional<int> term_signal;
    std::string end_reason; // exited | timed_out | killed_on_teardown | spawn_failed ...
    bool timed_out = false;
    bool killed = false;     // phase 3 (SIGKILL of the tree) was needed
    // A SIGTERM (timeout or teardown) was sent while the leader still ran.
    // False: the leader ended on its own, and its exit is its own result.
    bool stop_signalled = false;
    bool tree_empty = true;  // false only if the tree survived SIGKILL for kill_timeout
    std::chrono::milliseconds elapsed{0}; // since launch
};

// Which processes phase 1 sends SIGTERM to. `leader` (systemd's "mixed"):
// the hook decides how to stop its children (Chromium must close itself);
// `tree`: every process of the tree. A tree whose leader is gone always
// gets the tree-wide SIGTERM.
enum class TermTarget { leader, tree };

} // namespace orch
