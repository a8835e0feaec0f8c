#include "common/work/crawl_config_check.hpp"

#include "common/base/errors.hpp"
#include "common/work/url_filter.hpp"

namespace orch {

std::optional<std::string> crawl_config_problem(const nlohmann::json& config, const PluginRoots& roots,
                                                std::map<std::string, std::vector<ConfiguredHook>>* plan)
{
    const std::vector<std::string> events{"Crawl", "Snapshot", "CrawlEnd"};
    try {
        UrlFilter filter(config); // the patterns do not depend on the machine
    } catch (const ConfigError& e) {
        return std::string(e.what());
    }
    try {
        auto planned = plan_hooks(roots, config, events);
        if (plan != nullptr) {
            *plan = std::move(planned);
        }
        return std::nullopt;
    } catch (const ConfigError& e) {
        // Whose fault? Planned without the crawl's config, a machine problem throws
        // from here and is not the crawl's.
        plan_hooks(roots, nlohmann::json::object(), events);
        return std::string(e.what());
    }
}

} // namespace orch
