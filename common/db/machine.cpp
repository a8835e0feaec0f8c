#include "common/db/machine.hpp"
#include "common/base/printable.hpp"

#include "common/base/errors.hpp"
#include "common/url/url.hpp"
#include "common/base/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace orch {
namespace {

std::string read_trimmed(const char* path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r')) {
        line.pop_back();
    }
    return line;
}

std::string hostname()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) {
        return "localhost";
    }
    return buf;
}

} // namespace

MachineIdentity detect_machine(const std::optional<std::string>& override_id)
{
    MachineIdentity m;
    m.hostname = hostname();
    m.boot_id = read_boot_id();
    m.cpu_count = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (override_id) {
        // Stored as text and shown in every table: printable UTF-8 only.
        const bool shown_ok = is_valid_utf8(*override_id) &&
                               std::none_of(override_id->begin(), override_id->end(), [](char c) {
                                   return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                               });
        if (override_id->empty() || override_id->size() > 128 || !shown_ok) {
            throw InvalidInput(fmt::format("machine id must be 1 to 128 bytes of printable UTF-8, got '{}'",
                                           printable(*override_id, 140)));
        }
        m.id = *override_id;
    } else {
        m.id = read_trimmed("/etc/machine-id");
        if (m.id.empty()) {
            // No machine-id (minimal containers): the hostname is the most stable thing left.
            m.id = fmt::format("host-{:016x}", std::hash<std::string>{}(m.hostname));
        }
    }
    return m;
}

void register_machine(pqxx::connection& conn, const MachineIdentity& machine,
                      const std::optional<std::string>& containment)
{
    // Every worker start passes here: when nothing changed (and last_seen is
    // recent) the upsert writes nothing, so concurrent workers neither queue on
    // the machine row's lock nor wait for a WAL flush. One statement, autocommit.
    pqxx::nontransaction tx(conn);
    tx.exec_params0("INSERT INTO machine (id, hostname, boot_id, cpu_count, containment) "
                    "VALUES ($1, $2, $3, $4, $5) "
                    "ON CONFLICT (id) DO UPDATE SET hostname = EXCLUDED.hostname, boot_id = EXCLUDED.boot_id, "
                    "cpu_count = EXCLUDED.cpu_count, containment = coalesce(EXCLUDED.containment, machine.containment), "
                    "last_seen = now() "
                    "WHERE (machine.hostname, machine.boot_id, machine.cpu_count) IS DISTINCT FROM "
                    "      (EXCLUDED.hostname, EXCLUDED.boot_id, EXCLUDED.cpu_count) "
                    "   OR (EXCLUDED.containment IS NOT NULL AND machine.containment IS DISTINCT FROM EXCLUDED.containment) "
                    "   OR machine.last_seen < now() - interval '60 seconds'",
                    machine.id, machine.hostname, machine.boot_id, machine.cpu_count, containment);
}

} // namespace orch
