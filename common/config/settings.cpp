#include "common/config/settings.hpp"

#include "common/config/env_setting.hpp"
#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace orch {

const std::vector<const Setting*>& all_settings()
{
    static const std::vector<const Setting*> k_all = {
        &setting::teardown_grace,        &setting::lease_ttl,        &setting::snapshot_worker_max_snapshots,
        &setting::snapshot_worker_batch, &setting::snapshot_max_attempts, &setting::hook_parallelism,
        &setting::hook_log_max_bytes,
        &setting::default_max_per_host,  &setting::default_host_delay_ms, &setting::db_outage_grace};
    return k_all;
}

std::uint64_t read_setting(const Setting& s)
{
    return env_uint64(s.name, s.fallback, s.min, s.max);
}

int read_int_setting(const Setting& s)
{
    if (s.max > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        throw std::logic_error(fmt::format("{} does not fit an int", s.name));
    }
    return static_cast<int>(read_setting(s));
}

std::vector<SettingState> settings_state()
{
    std::vector<SettingState> out;
    for (const auto* s : all_settings()) {
        SettingState state;
        state.setting = s;
        if (const char* v = std::getenv(s->name); v != nullptr && *v != '\0') {
            state.raw = v;
        }
        try {
            state.value = read_setting(*s);
        } catch (const ConfigError& e) {
            state.error = e.what();
        }
        out.push_back(std::move(state));
    }
    return out;
}

std::string forced_containment_from_env()
{
    const char* forced = std::getenv("ORCH_CONTAINMENT");
    const std::string wanted = forced ? forced : "";
    if (wanted.empty() || wanted == "fallback" || wanted == "freezer" || wanted == "cgroup2") {
        return wanted;
    }
    throw ConfigError("ORCH_CONTAINMENT must be fallback, freezer or cgroup2 (or unset to probe), got '" + wanted +
                      "'");
}

void check_settings()
{
    std::vector<std::string> problems;
    for (const auto& state : settings_state()) {
        if (!state.value) {
            problems.push_back(state.error);
        }
    }
    try {
        forced_containment_from_env();
    } catch (const ConfigError& e) {
        problems.push_back(e.what());
    }
    if (!problems.empty()) {
        throw ConfigError(fmt::format("{}", fmt::join(problems, "; ")));
    }
}

} // namespace orch
