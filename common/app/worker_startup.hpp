#pragma once

#include "common/base/stop_signals.hpp"
#include "common/config/cli_options.hpp"
#include "common/db/database.hpp"
#include "common/db/machine.hpp"
#include "common/recorder/self_registration.hpp"
#include "common/recorder/supervisor.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace orch {

// The start-up the crawl worker and the snapshot worker share, in the order they
// take it: the constructor, then check_settings() once the worker has read what
// it refuses on, then register_self() once it is ready to be a process row, then
// supervisor_options() for its Supervisor. Owns the stop signals, the database
// connection and the data directory for the worker's whole run: create it first
// in the worker's run function (StopSignals: before any thread starts), and
// destroy it last. Not copyable, not movable (the outage policy and a supervisor
// point at its stop signals).
class WorkerStartup {
public:
    // Checks `process_id` (the row the parent prepared; empty = none), blocks the
    // stop signals, prepares the data directory, connects and requires the
    // current schema. Spawned by a supervisor, whose connection worked a moment
    // ago, a server that refuses the connection is in an outage, not a wrong URL,
    // and is waited for like one (database_outage.hpp); run by hand, a refusal
    // ends the run at once. Throws what require_uuid, prepare_data_dir,
    // Database::open and require_current_schema throw.
    WorkerStartup(const CommonOptions& common, const std::string& process_id);
    WorkerStartup(const WorkerStartup&) = delete;
    WorkerStartup& operator=(const WorkerStartup&) = delete;

    // Reads every setting, also those only another executable reads (one rule
    // for every executable: settings.hpp); throws ConfigError for a bad one.
    // From here on a lost connection is waited for, stoppable by the stop
    // signals, whatever started us.
    void check_settings();

    // Detects and registers this machine, then this process's row: the one the
    // parent prepared (process_id), else a new one. Fills in `registration`'s
    // machine, adopted row and data directory; the caller gives the rest (worker
    // type, crawl, snapshot). Sets the log context "self". Throws what
    // detect_machine, register_machine and register_self throw.
    const SelfRow& register_self(SelfRegistration registration);

    // The options of the worker's Supervisor: this machine, this process's row
    // (register_self first), containment scoped to the data directory, and the
    // stop signals.
    SupervisorOptions supervisor_options(std::chrono::milliseconds teardown_grace, std::uint64_t max_log_bytes);

    pqxx::connection& conn() { return m_db.conn(); }
    Database& database() { return m_db; }
    const std::filesystem::path& data_dir() const { return m_data_dir; }
    StopSignals& stop() { return m_stop; }
    // The row the parent prepared, when it named one.
    const std::optional<std::string>& adopt() const { return m_adopt; }
    // register_self first.
    const MachineIdentity& machine() const { return m_machine; }
    const SelfRow& self() const { return m_self; }

private:
    std::optional<std::string> m_adopt;
    std::optional<std::string> m_machine_override; // --machine-id / MACHINE_ID
    StopSignals m_stop;
    std::filesystem::path m_data_dir;
    Database m_db;
    MachineIdentity m_machine;
    SelfRow m_self;
};

} // namespace orch
