#pragma once

#include "common/hooks/hook_output.hpp"

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

namespace orch {

// Which discovered URLs become child snapshots: valid http(s) URLs (normalised,
// deduplicated) that match the crawl's allow patterns, if any, and none of its
// deny patterns. Patterns are ECMAScript regular expressions searched anywhere
// in the URL, from the crawl config keys "url_allow" and "url_deny" (a string
// or a list of strings). Patterns see the normalised URL: an internationalised
// host in its ASCII form ("xn--bcher-kva.example", not "bücher.example").
// Everything dropped is logged with its reason.
class UrlFilter {
public:
    // Throws ConfigError naming the pattern when one does not compile.
    explicit UrlFilter(const nlohmann::json& crawl_config);

    std::vector<std::string> accept(const std::vector<DiscoveredUrl>& discovered, const std::string& hook) const;

private:
    std::vector<std::regex> m_allow;
    std::vector<std::regex> m_deny;
};

} // namespace orch
