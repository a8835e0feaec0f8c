#include "common/archive/surt.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace orch {
namespace {

std::vector<std::string> split(const std::string& text, char sep)
{
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        const auto at = text.find(sep, start);
        parts.push_back(text.substr(start, at - start));
        if (at == std::string::npos) {
            return parts;
        }
        start = at + 1;
    }
}

// "www", "www2", "www10": the labels a SURT key drops from the front of a host
// (not from a host of two labels: "www.com" is a name of its own).
bool is_www_label(const std::string& label)
{
    return label.compare(0, 3, "www") == 0 &&
           std::all_of(label.begin() + 3, label.end(), [](unsigned char c) { return std::isdigit(c); });
}

} // namespace

std::string surt_key(std::string_view url)
{
    std::string text(url);
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string scheme;
    if (text.compare(0, 7, "http://") == 0) {
        scheme = "http";
    } else if (text.compare(0, 8, "https://") == 0) {
        scheme = "https";
    } else {
        return text;
    }
    std::string rest = text.substr(scheme.size() + 3);
    if (const auto hash = rest.find('#'); hash != std::string::npos) {
        rest.erase(hash);
    }
    const auto path_at = rest.find_first_of("/?");
    std::string authority = rest.substr(0, path_at);
    std::string tail = path_at == std::string::npos ? std::string() : rest.substr(path_at);
    if (const auto at = authority.rfind('@'); at != std::string::npos) {
        authority.erase(0, at + 1);
    }
    std::string host = authority;
    std::string port;
    // A port after the last ':' (not inside an IPv6 literal's brackets).
    if (const auto colon = authority.rfind(':');
        colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
    }
    if ((scheme == "http" && port == "80") || (scheme == "https" && port == "443")) {
        port.clear();
    }
    while (!host.empty() && host.back() == '.') {
        host.pop_back();
    }
    std::string key;
    if (!host.empty() && host.front() == '[') {
        key = host;  // an IPv6 literal is kept whole
    } else {
        auto labels = split(host, '.');
        if (labels.size() > 2 && is_www_label(labels.front())) {
            labels.erase(labels.begin());
        }
        for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
            key += (key.empty() ? "" : ",") + *it;
        }
    }
    if (!port.empty()) {
        key += ":" + port;
    }
    key += ')';
    const auto query_at = tail.find('?');
    std::string path = tail.substr(0, query_at);
    key += path.empty() ? "/" : path;
    if (query_at != std::string::npos && query_at + 1 < tail.size()) {
        auto args = split(tail.substr(query_at + 1), '&');
        args.erase(std::remove(args.begin(), args.end(), std::string()), args.end());
        std::sort(args.begin(), args.end());
        std::string query;
        for (const auto& arg : args) {
            query += (query.empty() ? "" : "&") + arg;
        }
        if (!query.empty()) {
            key += "?" + query;
        }
    }
    return key;
}

} // namespace orch
