#include "common/self_registration.hpp"

#include "common/command_line.hpp"
#include "common/errors.hpp"
#include "common/machine.hpp"
#include "common/pidfd.hpp"
#include "common/process_identity.hpp"
#include "common/process_table.hpp"
#include "common/random_id.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <cstdlib>
#include <unistd.h>

namespace orch {

SelfRow register_self(pqxx::connection& conn, const SelfRegistration& registration)
{
    SelfRegistration reg = registration;
    if (!reg.adopt_id) {
        // Spawned by one of our supervisors: the row it prepared carries the cookie it gave us.
        if (const char* cookie = std::getenv(k_cookie_env_var); cookie != nullptr && *cookie != '\0') {
            pqxx::nontransaction tx(conn); // one read: autocommit, no BEGIN/ROLLBACK
            auto r = tx.exec_params("SELECT id FROM process WHERE cookie = $1 AND machine_id = $2 "
                                    "AND process_type = $3 AND status <> 'exited'",
                                    std::string(cookie), reg.machine_id, reg.process_type);
            if (!r.empty()) {
                reg.adopt_id = r[0][0].as<std::string>();
            }
        }
    }
    if (reg.adopt_id) {
        // One statement in autocommit: committed (synchronously) when it returns.
        pqxx::nontransaction tx(conn);
        auto r = tx.exec_params("UPDATE process SET worker_type = coalesce(worker_type, $3), "
                                " crawl_id = coalesce(crawl_id, $4), snapshot_id = coalesce(snapshot_id, $5), "
                                " heartbeat_at = now() "
                                // By key, not through process_live_idx (ARCHITECTURE.md, the process table's keys).
                                "WHERE id = $1 AND machine_id = $2 AND (status <> 'exited') IS TRUE "
                                "RETURNING id, parent_id",
                                *reg.adopt_id, reg.machine_id, reg.worker_type, reg.crawl_id, reg.snapshot_id);
        tx.commit();
        if (r.empty()) {
            throw NotFound(fmt::format("process row {} to adopt not found on this machine (or already exited)",
                                       *reg.adopt_id));
        }
        SelfRow adopted{*reg.adopt_id, false, std::nullopt};
        if (!r[0][1].is_null()) {
            adopted.parent_id = r[0][1].as<std::string>();
        }
        return adopted;
    }
    auto self = Pidfd::open(::getpid());
    auto identity = capture_identity(*self, read_boot_id(), std::nullopt);
    process_table::NewRow row;
    row.id = random_uuid();
    row.machine_id = reg.machine_id;
    row.process_type = reg.process_type;
    row.cmd = own_command_line();
    row.pwd = std::filesystem::current_path().string();
    row.crawl_id = reg.crawl_id;
    row.snapshot_id = reg.snapshot_id;
    process_table::insert_running(conn, row, *identity, ::getpgrp());
    pqxx::work tx(conn);
    tx.exec_params0("UPDATE process SET worker_type = $2, data_dir = $3 WHERE id = $1", row.id, reg.worker_type,
                    reg.data_dir);
    tx.commit();
    return SelfRow{row.id, true, std::nullopt};
}

void close_self(pqxx::connection& conn, const SelfRow& self, int exit_code)
{
    if (!self.owned) {
        return;
    }
    // Its own CPU so far, everything it reaped included: the orchestrator and a
    // worker run by hand have no reaper of ours to record it.
    process_table::mark_exited(conn, self.id,
                               {exit_code, std::nullopt, "exited", {}, {}, ResourceUsage::of_self_and_reaped()});
}

std::string containment_scope(const std::string& data_dir)
{
    return fmt::format("d{:016x}", std::hash<std::string>{}(data_dir));
}

} // namespace orch
