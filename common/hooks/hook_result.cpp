#include "common/hooks/hook_result.hpp"

#include <fmt/format.h>

#include <csignal>

namespace orch {
namespace {

std::string describe_exit(const ProcessExit& exit)
{
    if (exit.term_signal) {
        return fmt::format("killed by signal {}", *exit.term_signal);
    }
    return fmt::format("exited with code {}", exit.exit_code);
}

std::string seconds_text(std::chrono::milliseconds ms)
{
    if (ms.count() % 1000 == 0) {
        return fmt::format("{}", ms.count() / 1000);
    }
    return fmt::format("{:.3f}", static_cast<double>(ms.count()) / 1000);
}

HookResult failed(std::string error)
{
    HookResult r;
    r.status = HookStatus::failed;
    r.error = std::move(error);
    return r;
}

} // namespace

std::string_view to_string(HookStatus status)
{
    switch (status) {
    case HookStatus::succeeded: return "succeeded";
    case HookStatus::failed: return "failed";
    case HookStatus::skipped: return "skipped";
    case HookStatus::noresults: return "noresults";
    }
    return "failed";
}

std::optional<HookStatus> parse_hook_status(std::string_view text)
{
    for (auto s : {HookStatus::succeeded, HookStatus::failed, HookStatus::skipped, HookStatus::noresults}) {
        if (to_string(s) == text) {
            return s;
        }
    }
    return std::nullopt;
}

HookResult decide_hook_result(const HookOutput& output, const HookEnd& end)
{
    if (!end.exit) {
        return failed(end.start_error.empty() ? "hook did not start" : end.start_error);
    }
    // Before output errors: a hook killed at its timeout often leaves a cut-off
    // last line, and "timed out" is the cause worth reporting.
    if (end.timed_out_after) {
        return failed(fmt::format("timed out after {} s", seconds_text(*end.timed_out_after)));
    }
    if (!output.errors.empty()) {
        std::string error = output.errors.front();
        std::size_t more = output.errors.size() - 1 + output.errors_dropped;
        if (more > 0) {
            error += fmt::format(" (and {} more problem{})", more, more == 1 ? "" : "s");
        }
        return failed(std::move(error));
    }
    ProcessExit exit = *end.exit;
    if (end.torn_down && (exit.term_signal == SIGTERM || (!exit.term_signal && exit.exit_code == 128 + SIGTERM))) {
        exit = ProcessExit{0, std::nullopt};
    }
    bool clean = !exit.term_signal && exit.exit_code == 0;
    bool skip_code = !exit.term_signal && exit.exit_code == k_hook_exit_skipped;

    if (const auto& record = output.archive_result) {
        HookResult r;
        r.status = parse_hook_status(record->status).value_or(HookStatus::failed);
        r.output_str = record->output_str;
        r.output_json = record->output_json;
        r.error = record->error;
        if (clean || (skip_code && r.status == HookStatus::skipped)) {
            return r;
        }
        if (r.status == HookStatus::failed) {
            // The default plugins exit 1 after reporting failed; the record's
            // own error is the useful text.
            if (!r.error) {
                r.error = fmt::format("hook reported failed and {}", describe_exit(exit));
            }
            return r;
        }
        // A hook that says "succeeded" and then exits 3 has not succeeded: its
        // output may be incomplete. Keep what it reported, but fail the result.
        std::string why = fmt::format("hook reported {} but {}", record->status, describe_exit(exit));
        r.error = r.error ? *r.error + "; " + why : why;
        r.status = HookStatus::failed;
        return r;
    }
    if (clean) {
        HookResult r;
        r.status = HookStatus::noresults;
        return r;
    }
    if (skip_code) {
        HookResult r;
        r.status = HookStatus::skipped;
        return r;
    }
    return failed(describe_exit(exit) + (end.torn_down ? " during teardown" : ""));
}

} // namespace orch
