#include "common/url/crawl_scope.hpp"

#include "common/url/registrable_domain.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace orch {
namespace {

constexpr std::array<std::pair<ScopeMode, const char*>, 5> k_names{{{ScopeMode::page, "page"},
                                                                     {ScopeMode::prefix, "prefix"},
                                                                     {ScopeMode::host, "host"},
                                                                     {ScopeMode::domain, "domain"},
                                                                     {ScopeMode::any, "any"}}};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// "www.a.test" for "a.test" and the other way round; an IP address has none.
std::optional<std::string> www_twin(const std::string& host)
{
    if (starts_with(host, "www.")) {
        return host.substr(4);
    }
    // normalise_host() spells an IPv4 address as its only all-numeric name.
    if (host.empty() || host.front() == '[' || host.find_first_not_of("0123456789.") == std::string::npos) {
        return std::nullopt;
    }
    return "www." + host;
}

// The seed URL up to the last '/' of its path: its directory. The normal form
// has a path that starts with '/' and no fragment.
std::string directory_of(const std::string& url)
{
    const auto path_start = url.find('/', url.find("://") + 3);
    const auto end = url.find('?', path_start);
    const auto last_slash = url.rfind('/', end == std::string::npos ? std::string::npos : end - 1);
    return url.substr(0, last_slash + 1);
}

} // namespace

std::optional<ScopeMode> parse_scope_mode(std::string_view text)
{
    for (const auto& [mode, name] : k_names) {
        if (text == name) {
            return mode;
        }
    }
    return std::nullopt;
}

const char* to_string(ScopeMode mode)
{
    for (const auto& [m, name] : k_names) {
        if (m == mode) {
            return name;
        }
    }
    return "any";
}

const char* scope_mode_names() { return "page, prefix, host, domain, any"; }

CrawlScope::CrawlScope(ScopeMode mode, const std::vector<std::string>& seeds) : m_mode(mode)
{
    for (const auto& seed : seeds) {
        auto check = check_url(seed);
        if (!check.valid) {
            continue;
        }
        const ValidUrl& v = *check.valid;
        m_urls.insert(v.url);
        m_prefixes.push_back(directory_of(v.url));
        m_hosts.insert(v.host);
        if (auto twin = www_twin(v.host)) {
            m_hosts.insert(*twin);
        }
        m_domains.insert(registrable_domain(v.host));
    }
}

bool CrawlScope::contains(const ValidUrl& url) const
{
    switch (m_mode) {
    case ScopeMode::page:
        return m_urls.count(url.url) != 0;
    case ScopeMode::prefix:
        return std::any_of(m_prefixes.begin(), m_prefixes.end(),
                           [&](const std::string& p) { return starts_with(url.url, p); });
    case ScopeMode::host:
        return m_hosts.count(url.host) != 0;
    case ScopeMode::domain:
        return m_domains.count(registrable_domain(url.host)) != 0;
    case ScopeMode::any:
        return true;
    }
    return true;
}

} // namespace orch
