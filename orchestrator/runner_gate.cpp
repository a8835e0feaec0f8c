#include "orchestrator/runner_gate.hpp"

#include "common/base/log.hpp"
#include "common/db/machine.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/process_identity.hpp"

#include <fmt/format.h>

#include <csignal>
#include <functional>
#include <thread>

namespace orch {
namespace {

// FNV-1a: stable across builds and processes, unlike std::hash.
long long gate_key(const std::string& machine_id, const std::string& data_dir)
{
    std::uint64_t h = 1469598103934665603ULL;
    for (const std::string* part : {&machine_id, &data_dir}) {
        for (unsigned char c : *part) {
            h = (h ^ c) * 1099511628211ULL;
        }
        h = (h ^ 0xff) * 1099511628211ULL;
    }
    return static_cast<long long>(h & 0x7fffffffffffffffULL);
}

} // namespace

RunnerGate::RunnerGate(pqxx::connection& conn, const std::string& machine_id, const std::string& data_dir)
    : m_conn(conn), m_machine_id(machine_id), m_data_dir(data_dir), m_key(gate_key(machine_id, data_dir))
{
}

bool RunnerGate::try_acquire()
{
    pqxx::nontransaction tx(m_conn);
    return tx.exec_params1("SELECT pg_try_advisory_lock($1)", m_key)[0].as<bool>();
}

std::string RunnerGate::holder_description(std::chrono::milliseconds wait_for_row)
{
    // A holder that has just taken the gate registers its row a moment later.
    auto deadline = std::chrono::steady_clock::now() + wait_for_row;
    for (;;) {
        pqxx::read_transaction tx(m_conn);
        auto r = tx.exec_params("SELECT id, pid, started_at FROM process WHERE machine_id = $1 AND data_dir = $2 "
                                "AND process_type = 'orchestrator' AND status = 'running' "
                                "ORDER BY started_at DESC LIMIT 1",
                                m_machine_id, m_data_dir);
        tx.commit();
        if (!r.empty()) {
            return fmt::format("orchestrator pid {} (process {}, since {})", r[0][1].c_str(), r[0][0].c_str(),
                               r[0][2].c_str());
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return "another orchestrator (still starting up)";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

bool RunnerGate::takeover(std::chrono::milliseconds bound)
{
    auto deadline = std::chrono::steady_clock::now() + bound;
    bool signalled = false;
    while (std::chrono::steady_clock::now() < deadline) {
        if (try_acquire()) {
            return true;
        }
        if (!signalled) {
            pqxx::read_transaction tx(m_conn);
            auto r = tx.exec_params("SELECT pid, boot_id, start_ticks, pidfs_ino, cookie FROM process "
                                    "WHERE machine_id = $1 AND data_dir = $2 AND process_type = 'orchestrator' "
                                    "AND status = 'running' AND pid IS NOT NULL",
                                    m_machine_id, m_data_dir);
            tx.commit();
            for (const auto& row : r) {
                ProcessIdentity id;
                id.pid = row[0].as<int>();
                id.boot_id = row[1].is_null() ? "" : row[1].as<std::string>();
                id.start_ticks = row[2].is_null() ? 0 : row[2].as<std::uint64_t>();
                if (!row[3].is_null()) {
                    id.pidfs_ino = row[3].as<std::uint64_t>();
                }
                if (!row[4].is_null()) {
                    id.cookie = row[4].as<std::string>();
                }
                // Signal only the process the row names, never a pid that was reused.
                if (auto fd = open_verified(id, read_boot_id())) {
                    log::info("asking the running orchestrator to stop", {{"pid", std::to_string(id.pid)}});
                    fd->send_signal(SIGTERM);
                    signalled = true;
                }
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

} // namespace orch
