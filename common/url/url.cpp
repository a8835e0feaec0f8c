#include "common/url/url.hpp"
#include "common/base/printable.hpp"

#include "common/url/url_host.hpp"
#include "common/url/url_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace orch {
namespace {

std::string lower(std::string_view s)
{
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

bool valid_utf8(std::string_view s)
{
    std::size_t i = 0;
    while (i < s.size()) {
        auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        if (c < 0x80) {
            n = 0;
        } else if ((c >> 5) == 0x6) {
            n = 1;
        } else if ((c >> 4) == 0xe) {
            n = 2;
        } else if ((c >> 3) == 0x1e) {
            n = 3;
        } else {
            return false;
        }
        if (i + n >= s.size() && n > 0) {
            return false;
        }
        for (std::size_t k = 1; k <= n; ++k) {
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) {
                return false;
            }
        }
        i += n + 1;
    }
    return true;
}

} // namespace


UrlCheck check_url(std::string_view text)
{
    UrlCheck result;
    if (text.empty()) {
        result.error = "empty URL";
        return result;
    }
    if (text.size() > k_max_url_length) {
        result.error = fmt::format("URL longer than {} bytes", k_max_url_length);
        return result;
    }
    for (unsigned char c : text) {
        if (c <= 0x20 || c == 0x7f) {
            result.error = "URL contains whitespace or control characters";
            return result;
        }
    }
    if (!valid_utf8(text)) {
        result.error = "URL is not valid UTF-8";
        return result;
    }
    auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) {
        result.error = "not a URL (no scheme)";
        return result;
    }
    std::string scheme = lower(text.substr(0, colon));
    if (scheme != "http" && scheme != "https") {
        result.error = fmt::format("unsupported scheme '{}' (only http and https are archived)", printable(scheme, 40));
        return result;
    }
    if (text.substr(colon, 3) != "://") {
        result.error = "URL must start with http:// or https://";
        return result;
    }
    std::string_view rest = text.substr(colon + 3);
    auto authority_end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, authority_end);
    std::string_view tail = authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
    std::string_view userinfo;
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
        userinfo = authority.substr(0, at + 1);
        authority = authority.substr(at + 1);
    }
    std::string_view host = authority;
    std::string_view port;
    if (!host.empty() && host.front() == '[') {
        auto close = host.find(']');
        if (close == std::string_view::npos) {
            result.error = "unterminated IPv6 address";
            return result;
        }
        port = host.substr(close + 1);
        host = host.substr(0, close + 1);
        if (!port.empty() && port.front() != ':') {
            result.error = "garbage after IPv6 address";
            return result;
        }
        port = port.empty() ? port : port.substr(1);
    } else if (auto pc = host.rfind(':'); pc != std::string_view::npos) {
        port = host.substr(pc + 1);
        host = host.substr(0, pc);
    }
    if (host.empty()) {
        result.error = "URL has no host";
        return result;
    }
    auto host_check = normalise_host(host);
    if (!host_check.host) {
        result.error = std::move(host_check.error);
        return result;
    }
    bool drop_port = false;
    if (!port.empty() || authority.back() == ':') {
        if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
            std::stoi(std::string(port)) > 65535 || std::stoi(std::string(port)) == 0) {
            result.error = "URL has an invalid port";
            return result;
        }
        drop_port = (scheme == "http" && port == "80") || (scheme == "https" && port == "443");
    }
    auto fragment = tail.find('#');
    if (fragment != std::string_view::npos) {
        tail = tail.substr(0, fragment);
    }
    std::string normalised = scheme + "://" + std::string(userinfo) + *host_check.host;
    if (!port.empty() && !drop_port) {
        normalised += ":" + std::string(port);
    }
    // The query is the server's business: "/../" in it is data, not a path step.
    auto query_start = tail.find('?');
    std::string_view path = tail.substr(0, query_start);
    std::string_view query = query_start == std::string_view::npos ? std::string_view{} : tail.substr(query_start);
    std::string clean_path = remove_dot_segments(path);
    normalised += clean_path.empty() ? "/" : clean_path;
    normalised += std::string(query);
    result.valid = ValidUrl{normalised, scheme, std::move(*host_check.host)};
    return result;
}

std::string resolve_url(const std::string& base, const std::string& reference)
{
    if (reference.find("://") != std::string::npos) {
        return reference;
    }
    auto scheme_end = base.find("://");
    if (scheme_end == std::string::npos) {
        return reference;
    }
    if (reference.rfind("//", 0) == 0) {
        return base.substr(0, scheme_end + 1) + reference;
    }
    auto path_start = base.find('/', scheme_end + 3);
    std::string origin = path_start == std::string::npos ? base : base.substr(0, path_start);
    if (!reference.empty() && reference.front() == '/') {
        return origin + reference;
    }
    std::string path = path_start == std::string::npos ? "/" : base.substr(path_start);
    path = path.substr(0, path.find_first_of("?#"));
    if (reference.empty() || reference.front() == '#') {
        return origin + path;
    }
    if (reference.front() == '?') {
        return origin + path + reference;
    }
    return origin + path.substr(0, path.rfind('/') + 1) + reference;
}

} // namespace orch
