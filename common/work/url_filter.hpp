#pragma once

#include "common/hooks/hook_output.hpp"
#include "common/url/crawl_scope.hpp"

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

namespace orch {

// A discovered URL not followed, and why.
struct SkippedUrl {
    std::string url;    // normalised
    std::string reason; // "out_of_scope" | "denied" (crawl_skipped_url.reason)
};

// What became of a page's discovered URLs: those to follow, in their order, and
// those skipped; each normalised URL at most once in all.
struct FilteredUrls {
    std::vector<std::string> accepted;
    std::vector<SkippedUrl> skipped;
};

// Which discovered URLs become child snapshots: valid http(s) URLs (normalised,
// deduplicated) within the crawl's scope (crawl_scope.hpp) that match the
// crawl's allow patterns, if any, and none of its deny patterns: all three must
// agree. Patterns are ECMAScript regular expressions searched anywhere
// in the URL, from the crawl config keys "url_allow" and "url_deny" (a string
// or a list of strings). Patterns see the normalised URL: an internationalised
// host in its ASCII form ("xn--bcher-kva.example", not "bücher.example").
// Everything dropped is logged with its reason; out of scope and denied ones
// are also returned as skipped (invalid ones only logged).
class UrlFilter {
public:
    // Throws ConfigError naming the pattern when one does not compile.
    explicit UrlFilter(const nlohmann::json& crawl_config, CrawlScope scope = CrawlScope(ScopeMode::any, {}));

    FilteredUrls accept(const std::vector<DiscoveredUrl>& discovered, const std::string& hook) const;

private:
    std::vector<std::regex> m_allow;
    std::vector<std::regex> m_deny;
    CrawlScope m_scope;
};

} // namespace orch
