#pragma once

#include "common/supervision/resource_usage.hpp"

#include <optional>

#include <signal.h>

namespace orch {

// How a reaped process ended. Follows the shell convention: a process killed
// by signal N has exit_code 128+N and term_signal N, so a row shows "143" for
// SIGTERM and "137" for SIGKILL.
struct ProcessExit {
    int exit_code = 0;
    std::optional<int> term_signal;
    // From the reaping waitid(); nullopt where the reaper did not ask for it.
    std::optional<ResourceUsage> usage{};

    // Decodes the siginfo filled in by waitid(). Never throws.
    static ProcessExit from_siginfo(const siginfo_t& info) noexcept
    {
        ProcessExit result;
        if (info.si_code == CLD_EXITED) {
            result.exit_code = info.si_status;
        } else {
            result.exit_code = 128 + info.si_status;
            result.term_signal = info.si_status;
        }
        return result;
    }
};

} // namespace orch
