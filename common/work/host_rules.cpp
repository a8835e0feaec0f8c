#include "common/work/host_rules.hpp"

#include "common/config/settings.hpp"

namespace orch {

HostRules machine_host_rules()
{
    return HostRules{read_int_setting(setting::default_max_per_host), read_int_setting(setting::default_host_delay_ms)};
}

void apply_host_rules(pqxx::connection& conn, const HostRules& rules)
{
    if (!rules.any()) {
        return;
    }
    // Session settings: they last as long as the connection, which is the
    // worker's only one; libpqxx sets them again when it reconnects it after a
    // database outage (common/db/database_outage.hpp). Whole numbers: nothing to quote.
    conn.set_variable("orch.default_max_per_host", std::to_string(rules.max_per_host));
    conn.set_variable("orch.default_host_delay_ms", std::to_string(rules.delay_ms));
}

} // namespace orch
