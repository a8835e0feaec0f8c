#pragma once

#include "common/hooks/hook_output.hpp"
#include "common/supervision/process_exit.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

// Turning what a hook printed and how it ended into the archive_result row.
//
//   did not start                                             -> failed, the start error
//   timed out                                                 -> failed, "timed out after N s"
//   contract violation in the output (see hook_output.hpp)   -> failed, error names it
//   ArchiveResult record, exit 0                              -> the record's status
//   ArchiveResult record, exit 10, status skipped             -> skipped
//   ArchiveResult failed, any exit                            -> failed, the record's error
//   other ArchiveResult, other non-zero exit or a signal      -> failed; error says both
//   no record: exit 0 -> noresults; exit 10 -> skipped;
//              other exit -> failed "exited with code N"; signal -> failed "killed by signal N"
// A background hook stopped by teardown with SIGTERM (signal 15 or exit 143)
// counts as exit 0: being stopped at the end of the snapshot is its normal end.
namespace orch {

enum class HookStatus { succeeded, failed, skipped, noresults };

std::string_view to_string(HookStatus status);
std::optional<HookStatus> parse_hook_status(std::string_view text);

inline constexpr int k_hook_exit_skipped = 10;

// How one hook run ended, as the worker observed it.
struct HookEnd {
    std::optional<ProcessExit> exit;  // nullopt: the hook never started
    std::string start_error;          // why, when it never started
    std::optional<std::chrono::milliseconds> timed_out_after;  // stopped at its timeout
    bool torn_down = false;           // stopped by the worker's teardown

    static HookEnd exited(int code) { return HookEnd{ProcessExit{code, std::nullopt}, {}, {}, false}; }
    static HookEnd signalled(int signal) { return HookEnd{ProcessExit{128 + signal, signal}, {}, {}, false}; }
    static HookEnd not_started(std::string why) { return HookEnd{std::nullopt, std::move(why), {}, false}; }
};

struct HookResult {
    HookStatus status = HookStatus::failed;
    std::optional<std::string> output_str;
    nlohmann::json output_json;  // null when absent
    std::optional<std::string> error;
};

// Pure. Every string in the result is valid UTF-8 (record strings were
// validated by the parser; messages built here quote nothing raw).
HookResult decide_hook_result(const HookOutput& output, const HookEnd& end);

} // namespace orch
