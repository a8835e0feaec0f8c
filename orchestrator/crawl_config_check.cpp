#include "orchestrator/crawl_config_check.hpp"

#include "common/errors.hpp"
#include "common/hook_plan.hpp"
#include "common/log.hpp"
#include "common/url_filter.hpp"

#include <fmt/format.h>


namespace orch {

void check_crawl_config(const nlohmann::json& config, const std::string& plugins_dir)
{
    try {
        UrlFilter filter(config);
    } catch (const ConfigError& e) {
        throw InvalidInput(e.what());
    }
    const std::vector<std::string> events{"Crawl", "Snapshot", "CrawlEnd"};
    PluginRoots roots;
    try {
        roots = plugin_roots(plugins_dir);
        plan_hooks(roots, nlohmann::json::object(), events);
    } catch (const ConfigError& e) {
        log::warn("crawl config not checked against the plugins: they cannot be planned here",
                  {{"error", e.what()}});
        return;
    }
    try {
        plan_hooks(roots, config, events);
    } catch (const ConfigError& e) {
        throw InvalidInput(e.what());
    }
}

nlohmann::json crawl_config_option(const std::string& text, const std::string& plugins_dir)
{
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw InvalidInput(fmt::format("--config is not valid JSON: {}", e.what()));
    }
    if (!config.is_object()) {
        throw InvalidInput("--config must be a JSON object");
    }
    check_crawl_config(config, plugins_dir);
    return config;
}

} // namespace orch
