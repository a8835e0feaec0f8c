#include "orchestrator/crawl_config_check.hpp"

#include "common/work/crawl_config_check.hpp"
#include "common/base/errors.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>

namespace orch {

void check_crawl_config(const nlohmann::json& config, const std::string& plugins_dir)
{
    std::optional<std::string> problem;
    try {
        problem = crawl_config_problem(config, plugin_roots(plugins_dir));
    } catch (const ConfigError& e) {
        log::warn("crawl config not checked against the plugins: they cannot be planned here",
                  {{"error", e.what()}});
        return;
    }
    if (problem) {
        throw InvalidInput(*problem);
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
