#pragma once

#include "common/base/fd.hpp"

#include <signal.h>

namespace orch {

// SIGTERM and SIGINT (and SIGHUP) as a readable fd for a poll loop. Blocks those
// signals in the calling thread from construction on, and leaves them blocked
// after destruction: an executable's run function holds one for its whole run,
// and a stop request that arrives after it returned (the work wound down, the
// exit code decided) must not kill the process with the default action on its
// way out and turn a clean exit into death by SIGTERM, as restoring the mask
// did. Create it before any thread starts. Children get a clean mask from the
// launcher, so they still receive signals.
class StopSignals {
public:
    StopSignals();
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

    int fd() const noexcept { return m_fd.get(); }
    // Drains pending signals; returns how many stop requests arrived (0 if none).
    int take();
    // Total stop requests seen so far.
    int count() const noexcept { return m_count; }

private:
    Fd m_fd;
    int m_count = 0;
};

} // namespace orch
