#pragma once

#include "common/hooks/hook_result.hpp"
#include "common/hooks/output_files.hpp"
#include "common/base/write_behind.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace orch {

// The archive_result writes of one snapshot, held back for at most k_delay
// and then sent together (SnapshotStore::flush_results): a hook that ends
// within k_delay of its start gets one write for its start and its end, and
// the results of hooks that end close together share one statement. What a
// crash of the worker can lose is the last k_delay of writes, which only
// reruns those hooks (their results stayed queued or started), as after a
// crash during the hook itself. Times are kept as steady-clock points and
// written as "that long before now()", so the database's clock stays the
// only one in the rows. Pure bookkeeping: no I/O, never throws except
// std::bad_alloc.
class ResultWriteBehind {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds k_delay = k_write_behind_window;

    // The hook of `result_id` started as process `process_id` at `at`.
    void started(const std::string& result_id, const std::string& process_id, Clock::time_point at);
    // Its result; merges with a start not yet written.
    void finished(const std::string& result_id, const HookResult& result, const OutputFiles& files,
                  Clock::time_point at);

    bool empty() const noexcept { return m_pending.empty(); }
    // When the oldest held write falls due; nullopt when nothing is held.
    std::optional<Clock::time_point> next_due() const;
    // The writes due at `now` (every write with Clock::time_point::max()),
    // removed from the buffer, as the text of the JSON array the flush
    // statement reads (one object per result: see snapshot_store.cpp); "[]"
    // if none.
    std::string take(Clock::time_point now);

private:
    struct Pending {
        Clock::time_point due;
        std::optional<std::string> process_id; // set while the start is unwritten
        Clock::time_point started_at;
        std::optional<std::string> end;        // the result's columns as JSON members, once finished
        Clock::time_point ended_at;
    };
    std::map<std::string, Pending> m_pending;
};

} // namespace orch
