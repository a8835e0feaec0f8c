#include "common/work/url_filter.hpp"
#include "common/base/printable.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/url/url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace orch {
namespace {

std::vector<std::regex> compile(const nlohmann::json& config, const char* key)
{
    std::vector<std::regex> out;
    if (!config.is_object() || !config.contains(key)) {
        return out;
    }
    const auto& value = config.at(key);
    std::vector<std::string> patterns;
    if (value.is_string()) {
        patterns.push_back(value.get<std::string>());
    } else if (value.is_array()) {
        for (const auto& p : value) {
            if (!p.is_string()) {
                throw ConfigError(fmt::format("crawl config {}: every pattern must be a string", key));
            }
            patterns.push_back(p.get<std::string>());
        }
    } else {
        throw ConfigError(fmt::format("crawl config {}: expected a string or a list of strings", key));
    }
    for (const auto& p : patterns) {
        try {
            out.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
        } catch (const std::regex_error& e) {
            throw ConfigError(fmt::format("crawl config {}: invalid pattern '{}': {}", key, printable(p, 100), e.what()));
        }
    }
    return out;
}

} // namespace

UrlFilter::UrlFilter(const nlohmann::json& crawl_config, CrawlScope scope)
    : m_allow(compile(crawl_config, "url_allow")), m_deny(compile(crawl_config, "url_deny")), m_scope(std::move(scope))
{
}

FilteredUrls UrlFilter::accept(const std::vector<DiscoveredUrl>& discovered, const std::string& hook) const
{
    FilteredUrls out;
    std::set<std::string> seen;
    for (const auto& d : discovered) {
        auto check = check_url(d.url);
        if (!check.valid) {
            log::info("dropped discovered URL",
                      {{"hook", hook}, {"url", printable(d.url, 200)}, {"reason", check.error}});
            continue;
        }
        const auto& url = check.valid->url;
        if (!seen.insert(url).second) {
            continue;
        }
        const char* reason = nullptr;
        if (!m_scope.contains(*check.valid)) {
            reason = "out_of_scope";
        } else if (!m_allow.empty() && std::none_of(m_allow.begin(), m_allow.end(), [&](const std::regex& r) {
                       return std::regex_search(url, r);
                   })) {
            reason = "denied"; // by url_allow: matches none of its patterns
        } else if (std::any_of(m_deny.begin(), m_deny.end(),
                               [&](const std::regex& r) { return std::regex_search(url, r); })) {
            reason = "denied";
        }
        if (reason) {
            log::debug("dropped discovered URL", {{"hook", hook}, {"url", url}, {"reason", reason}});
            out.skipped.push_back({url, reason});
        } else {
            out.accepted.push_back(url);
        }
    }
    return out;
}

} // namespace orch
