#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace orch {

// Finds at `add` time what the workers would refuse in a crawl's `config` once
// it runs (a crawl worker exits 3 for it, and a daemon retries such a crawl
// forever): a url_allow / url_deny pattern that does not compile, or a plugin
// value of the wrong type for a plugin found here (built-ins and `plugins_dir`).
// Throws InvalidInput naming it. When the plugins here cannot be planned even
// without a crawl config (a machine problem, not the input's), they are not
// checked: the machine that runs the crawl may have others. Blocks on disk only.
void check_crawl_config(const nlohmann::json& config, const std::string& plugins_dir);

// A `--config` value (of `add` and `schedule add`) as the crawl config it
// gives: a JSON object, checked as above. Throws InvalidInput when it is not
// valid JSON, not an object, or refused.
nlohmann::json crawl_config_option(const std::string& text, const std::string& plugins_dir);

} // namespace orch
