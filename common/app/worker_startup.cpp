#include "common/app/worker_startup.hpp"

#include "common/base/ids.hpp"
#include "common/base/log.hpp"
#include "common/config/settings.hpp"
#include "common/db/database_outage.hpp"
#include "common/db/migrate.hpp"

namespace orch {
namespace {

// Run between blocking the stop signals and connecting: the outage policy
// refers to them, and the connection is the first thing it governs.
std::filesystem::path ride_out_refusals_then_prepare(const StopSignals& stop, const CommonOptions& common)
{
    if (started_by_supervisor()) {
        set_outage_policy(stoppable_outage_policy(stop));
    }
    return prepare_data_dir(common);
}

} // namespace

WorkerStartup::WorkerStartup(const CommonOptions& common, const std::string& process_id)
    : m_adopt(optional_uuid(process_id, "process id")),
      m_machine_override(optional_machine_id(common)),
      m_data_dir(ride_out_refusals_then_prepare(m_stop, common)),
      m_db(Database::open(common, m_data_dir))
{
    require_current_schema(m_db.conn());
}

void WorkerStartup::check_settings()
{
    orch::check_settings();
    set_outage_policy(stoppable_outage_policy(m_stop));
}

const SelfRow& WorkerStartup::register_self(SelfRegistration registration)
{
    m_machine = detect_machine(m_machine_override);
    register_machine(m_db.conn(), m_machine, std::nullopt);
    registration.machine_id = m_machine.id;
    registration.adopt_id = m_adopt;
    registration.data_dir = m_data_dir.string();
    m_self = orch::register_self(m_db.conn(), registration);
    log::set_context("self", m_self.id);
    return m_self;
}

SupervisorOptions WorkerStartup::supervisor_options(std::chrono::milliseconds teardown_grace, std::uint64_t max_log_bytes)
{
    SupervisorOptions sup;
    sup.machine_id = m_machine.id;
    sup.self_row_id = m_self.id;
    sup.containment.scope = containment_scope(m_data_dir.string());
    sup.teardown_grace = teardown_grace;
    sup.max_log_bytes = max_log_bytes;
    sup.stop_signals = &m_stop;
    return sup;
}

} // namespace orch
