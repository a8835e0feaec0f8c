#pragma once

#include "common/fd.hpp"

#include <signal.h>

namespace orch {

// SIGTERM and SIGINT (and SIGHUP) as a readable fd for a poll loop. Blocks those
// signals in the calling thread for the object's lifetime and restores the
// previous mask on destruction. Create it before any thread starts. Children get
// a clean mask from the launcher, so they still receive signals.
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
    sigset_t m_previous;
    int m_count = 0;
};

} // namespace orch
