#include "common/host_rules.hpp"

#include "common/settings.hpp"

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
    // Session settings (is_local false): they last as long as the connection,
    // which is the worker's only one.
    pqxx::nontransaction tx(conn);
    tx.exec_params("SELECT set_config('orch.default_max_per_host', $1, false), "
                   "set_config('orch.default_host_delay_ms', $2, false)",
                   std::to_string(rules.max_per_host), std::to_string(rules.delay_ms));
}

} // namespace orch
