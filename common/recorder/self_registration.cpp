#include "common/recorder/self_registration.hpp"

#include "common/supervision/command_line.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "common/db/machine.hpp"
#include "common/supervision/pidfd.hpp"
#include "common/supervision/process_identity.hpp"
#include "common/recorder/process_table.hpp"
#include "common/base/random_id.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <cstdlib>
#include <unistd.h>

namespace orch {

namespace {

std::optional<std::string> env_value(const char* name)
{
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? std::optional<std::string>(value) : std::nullopt;
}

// Adopts the row `id`, if it is ours: on this machine, not exited, and given the
// cookie we carry. One statement, committed when it returns. Empty if not.
std::optional<SelfRow> adopt(pqxx::connection& conn, const SelfRegistration& reg, const std::string& id,
                             const std::optional<std::string>& cookie)
{
    pqxx::nontransaction tx(conn);
    auto r = tx.exec_params("UPDATE process SET worker_type = coalesce(worker_type, $3), "
                            " crawl_id = coalesce(crawl_id, $4), snapshot_id = coalesce(snapshot_id, $5), "
                            " heartbeat_at = now() "
                            // By key, not through process_live_idx (docs/database-costs.md, partial indexes).
                            "WHERE id = $1 AND machine_id = $2 AND (status <> 'exited') IS TRUE "
                            "  AND ($6::text IS NULL OR (cookie = $6) IS TRUE) "
                            "RETURNING id, parent_id",
                            id, reg.machine_id, reg.worker_type, reg.crawl_id, reg.snapshot_id, cookie);
    tx.commit();
    if (r.empty()) {
        return std::nullopt;
    }
    SelfRow adopted{id, false, std::nullopt};
    if (!r[0][1].is_null()) {
        adopted.parent_id = r[0][1].as<std::string>();
    }
    return adopted;
}

} // namespace

SelfRow register_self(pqxx::connection& conn, const SelfRegistration& registration)
{
    SelfRegistration reg = registration;
    if (reg.adopt_id) {
        if (auto adopted = adopt(conn, reg, *reg.adopt_id, std::nullopt)) {
            return *adopted;
        }
        throw NotFound(fmt::format("process row {} to adopt not found on this machine (or already exited)",
                                   *reg.adopt_id));
    }
    // Spawned by one of our supervisors: the row it prepared carries the cookie it
    // gave us, and its id came with it. By key when we have the id: the cookie is
    // no index condition, and the search by it reads process_live_idx, through
    // the entry of every hook that exited since the last vacuum (970 buffers after
    // a crawl of 8,000 snapshots). The cookie must match too: an id alone could be
    // another process's.
    if (const auto cookie = env_value(k_cookie_env_var)) {
        if (const auto id = env_value(k_process_id_env_var); id && is_uuid(*id)) {
            if (auto adopted = adopt(conn, reg, *id, cookie)) {
                return *adopted;
            }
        }
        // Spawned without the id (by an older supervisor), or the id is not ours.
        const auto r = pqxx::nontransaction(conn).exec_params( // one read: autocommit, no BEGIN/ROLLBACK
            "SELECT id FROM process WHERE cookie = $1 AND machine_id = $2 AND process_type = $3 AND status <> 'exited'",
            *cookie, reg.machine_id, reg.process_type);
        if (!r.empty()) {
            const auto found = r[0][0].as<std::string>();
            if (auto adopted = adopt(conn, reg, found, cookie)) {
                return *adopted;
            }
            throw NotFound(fmt::format("process row {} to adopt not found on this machine (or already exited)", found));
        }
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
    ride_out_transaction(conn, [&](pqxx::work& tx) {
        tx.exec_params0("UPDATE process SET worker_type = $2, data_dir = $3 WHERE id = $1", row.id, reg.worker_type,
                        reg.data_dir);
    });
    return SelfRow{row.id, true, std::nullopt};
}

bool started_by_supervisor()
{
    return env_value(k_process_id_env_var).has_value();
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
