#pragma once

#include "common/supervision/process_identity.hpp" // read_boot_id

#include <pqxx/pqxx>

#include <optional>
#include <string>

namespace orch {

struct MachineIdentity {
    std::string id;       // stable across restarts; --machine-id / MACHINE_ID overrides
    std::string hostname;
    std::string boot_id;  // changes at every boot; part of every process identity
    int cpu_count = 1;
};

// Reads /etc/machine-id (else a hash of the hostname) unless `override_id` is given.
// Throws InvalidInput for an override that is empty or longer than 128 characters.
MachineIdentity detect_machine(const std::optional<std::string>& override_id);

// Inserts or refreshes the machine row (hostname, boot id, cpus, last_seen, containment).
void register_machine(pqxx::connection& conn, const MachineIdentity& machine,
                      const std::optional<std::string>& containment);

} // namespace orch
