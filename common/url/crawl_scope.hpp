#pragma once

#include "common/url/url.hpp"

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace orch {

// How far from its seeds a crawl may go: which discovered URLs may become its
// snapshots (docs/urls-and-scope.md).
enum class ScopeMode {
    page,   // only the seeds themselves: no children
    prefix, // the same scheme, host and port, and a path under the seed's directory
    host,   // the seeds' hosts and their "www." twins, any scheme and port (the default)
    domain, // the seeds' registrable domains (registrable_domain.hpp)
    any,    // everything
};

constexpr ScopeMode k_default_scope = ScopeMode::host;

// "page", "prefix", "host", "domain", "any"; nullopt for anything else.
std::optional<ScopeMode> parse_scope_mode(std::string_view text);
const char* to_string(ScopeMode mode);
// The names above, comma-separated, for messages.
const char* scope_mode_names();

// A crawl's scope: a pure function of its mode and seed URLs. Immutable,
// thread-safe after construction; never throws except std::bad_alloc.
class CrawlScope {
public:
    // `seeds` as the crawl stores them; a seed check_url() refuses adds nothing.
    CrawlScope(ScopeMode mode, const std::vector<std::string>& seeds);

    // Whether `url` (as check_url() gives it) is within the scope.
    bool contains(const ValidUrl& url) const;
    ScopeMode mode() const { return m_mode; }

private:
    ScopeMode m_mode;
    std::set<std::string> m_urls;       // page
    std::vector<std::string> m_prefixes; // prefix: "scheme://host[:port]/dir/"
    std::set<std::string> m_hosts;      // host: with the www. twins
    std::set<std::string> m_domains;    // domain
};

} // namespace orch
