#pragma once

#include <string>

namespace orch {

// One archive_result of a snapshot as a seal-and-claim statement returns it:
// its row id and its status (queued, started, succeeded, failed, skipped).
struct ResultState {
    std::string id;
    std::string status;
};

} // namespace orch
