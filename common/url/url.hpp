#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace orch {

// A URL accepted for archiving, normalised: scheme lower-cased, host in its one
// spelling (common/url/url_host.hpp: lower-case ASCII, IDNA A-labels, no trailing
// '.', canonical IPv6), default port and fragment removed, empty path made "/",
// "." and ".." segments removed from the path (RFC 3986 5.2.4; the query is
// left as it is).
struct ValidUrl {
    std::string url;
    std::string scheme; // "http" or "https"
    std::string host;   // as normalise_host() gives it, and as url_host() reads it back from `url`
};

// The result of checking one URL: the normalised URL, or why it was rejected
// (a sentence naming the problem; the caller adds the offending value).
struct UrlCheck {
    std::optional<ValidUrl> valid;
    std::string error;
};

constexpr std::size_t k_max_url_length = 8192;

// Accepts http and https URLs with a host; rejects control characters, spaces,
// invalid UTF-8, credentials-only or empty hosts, hosts normalise_host() refuses,
// bad ports and over-long input.
UrlCheck check_url(std::string_view text);

// Resolves `reference` (as found in a page) against `base`; the result still needs check_url().
std::string resolve_url(const std::string& base, const std::string& reference);

} // namespace orch
