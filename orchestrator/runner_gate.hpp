#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <string>

namespace orch {

// The single-runner gate: one active orchestrator per (machine, data directory),
// held as a session-level PostgreSQL advisory lock on the orchestrator's own
// connection (released by the server if the process dies) and mirrored by the
// partial unique index on process rows.
class RunnerGate {
public:
    RunnerGate(pqxx::connection& conn, const std::string& machine_id, const std::string& data_dir);

    // Takes the gate if free. Returns false when another session holds it.
    bool try_acquire();
    // Asks the running orchestrator (found from its row, identity-verified) to stop
    // with SIGTERM, then waits up to `bound` for the gate. Returns false on timeout
    // or when the holder cannot be found on this machine.
    bool takeover(std::chrono::milliseconds bound);
    // Who holds the gate, for error messages ("orchestrator pid 123 (process ..., since ...)").
    // Waits up to `wait_for_row` for a holder that is still starting up to register.
    std::string holder_description(std::chrono::milliseconds wait_for_row = std::chrono::seconds(3));
    long long key() const { return m_key; }

private:
    pqxx::connection& m_conn;
    std::string m_machine_id;
    std::string m_data_dir;
    long long m_key;
};

} // namespace orch
