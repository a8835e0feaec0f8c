#include "common/crawl_config_check.hpp"

#include "common/errors.hpp"
#include "common/hook_plan.hpp"
#include "common/url_filter.hpp"

namespace orch {

std::optional<std::string> crawl_config_problem(const nlohmann::json& config, const PluginRoots& roots)
{
    const std::vector<std::string> events{"Crawl", "Snapshot", "CrawlEnd"};
    // The machine first: a failure here is not the crawl's, and must escape.
    plan_hooks(roots, nlohmann::json::object(), events);
    try {
        UrlFilter filter(config);
        plan_hooks(roots, config, events);
    } catch (const ConfigError& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

} // namespace orch
