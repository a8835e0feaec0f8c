#pragma once

#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace orch::test {

// Fixed ids of the known tree OpsTree inserts:
//   orchestrator (running, pid = this test process, so `status` finds it alive)
//   `-crawl_worker W (running, holds crawl C1's lease)
//     |-snapshot_worker SW1 (exited 0, S1)   `-hook wget H1 (exited 0; stdout file gone, tail stored)
//     |-snapshot_worker SW2 (exited 1, S2)   `-hook wget H2 (SIGKILL after timeout; stderr file, 5 lines)
//     `-snapshot_worker SW3 (running, S3)    `-hook title H3 (running; stdout file)
// Crawl C1 (started): S1 sealed succeeded, S2 sealed failed (wget failed "boom"), S3 started.
// Crawl C2 (queued, no lease): S4 queued with a queued result.
namespace ops_ids {
inline const std::string orchestrator = "00000000-0000-4000-8000-0000000000a0";
inline const std::string crawl_worker = "00000000-0000-4000-8000-0000000000a1";
inline const std::string sw1 = "00000000-0000-4000-8000-0000000000b1";
inline const std::string sw2 = "00000000-0000-4000-8000-0000000000b2";
inline const std::string sw3 = "00000000-0000-4000-8000-0000000000b3";
inline const std::string h1 = "00000000-0000-4000-8000-0000000000c1";
inline const std::string h2 = "00000000-0000-4000-8000-0000000000c2";
inline const std::string h3 = "00000000-0000-4000-8000-0000000000c3";
inline const std::string c1 = "00000000-0000-4000-8000-0000000000d1";
inline const std::string c2 = "00000000-0000-4000-8000-0000000000d2";
inline const std::string s1 = "00000000-0000-4000-8000-0000000000e1";
inline const std::string s2 = "00000000-0000-4000-8000-0000000000e2";
inline const std::string s3 = "00000000-0000-4000-8000-0000000000e3";
inline const std::string s4 = "00000000-0000-4000-8000-0000000000e4";
} // namespace ops_ids

class OpsTree {
public:
    OpsTree();
    const ScratchDatabase& db() const { return m_db; }
    const std::filesystem::path& dir() const { return m_dir.path(); }
    std::string machine_id() const { return m_machine; }
    // Runs `orchestrator ARGS --database-url ... --data-dir ... --machine-id ...`.
    CommandResult run(std::vector<std::string> args) const;
    // Runs one statement on the scratch database.
    void exec(const std::string& sql) const;
    std::string scalar(const std::string& sql) const;

private:
    ScratchDatabase m_db;
    ScratchDir m_dir;
    std::string m_machine;
};

// JSON lines of a command's stdout, parsed (each line must be one JSON object).
std::vector<std::string> lines_of(const std::string& text);

} // namespace orch::test
