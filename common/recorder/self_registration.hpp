#pragma once

#include <pqxx/pqxx>

#include <optional>
#include <string>

namespace orch {

// Who this process is in the `process` table.
struct SelfRegistration {
    std::string machine_id;
    std::optional<std::string> adopt_id; // row prepared by the parent (--process-id); else a row is inserted
    std::string process_type = "worker";
    std::optional<std::string> worker_type; // crawl | snapshot
    std::optional<std::string> crawl_id;
    std::optional<std::string> snapshot_id;
    std::string data_dir;
};

struct SelfRow {
    std::string id;
    bool owned = false; // inserted by us: we record our own exit; adopted rows are closed by the parent
    std::optional<std::string> parent_id; // the supervisor that prepared an adopted row
};

// Adopts the parent's row (the parent records our pid and identity when it spawns us),
// named by --process-id, or by the id and cookie the parent put in our environment
// (ORCH_PROCESS_ID with ORCH_PROCESS_COOKIE, both matching), or found by the cookie
// alone; the row must be on this machine and not exited. Else inserts a running row
// for this process with its OS identity. Throws NotFound for an unknown adopt id.
SelfRow register_self(pqxx::connection& conn, const SelfRegistration& registration);

// Whether a supervisor of ours started this process: it gave us our row id
// (ORCH_PROCESS_ID), which only a supervisor's spawn of a worker does.
bool started_by_supervisor();

// Closes a row we inserted ourselves, with our exit code. No-op for adopted rows.
void close_self(pqxx::connection& conn, const SelfRow& self, int exit_code);

// The containment scope for a data directory: hooks of different data
// directories live in different cgroup subtrees.
std::string containment_scope(const std::string& data_dir);

} // namespace orch
