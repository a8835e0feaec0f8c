#pragma once

#include "common/hooks/hook_plan.hpp"
#include "common/hooks/plugin_roots.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace orch {

// What the workers would refuse in a crawl's own `config`: a url_allow /
// url_deny pattern that does not compile, or a plugin value of the wrong type
// for a plugin under `roots`. Returns the problem, or nullopt when there is
// none; then, with `plan`, also stores the plan of the Crawl, Snapshot and
// CrawlEnd hooks with that config (one plan_hooks, the common case). Throws
// ConfigError when the plugins under `roots` cannot be planned even without a
// crawl config: that is the machine's problem, not the crawl's, and says nothing
// about the crawl. Blocks on disk only.
std::optional<std::string> crawl_config_problem(const nlohmann::json& config, const PluginRoots& roots,
                                                std::map<std::string, std::vector<ConfiguredHook>>* plan = nullptr);

} // namespace orch
