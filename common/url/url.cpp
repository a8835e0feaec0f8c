#include "common/url/url.hpp"
#include "common/base/printable.hpp"

#include "common/url/url_host.hpp"
#include "common/url/url_path.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

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

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

bool is_unreserved(unsigned char c)
{
    return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~';
}

int hex_value(char c)
{
    return std::isdigit(static_cast<unsigned char>(c)) != 0 ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

// Characters RFC 3986 allows nowhere in a URI but pages write anyway; browsers
// send them percent-encoded (the WHATWG percent-encode sets), so do we.
bool never_literal(unsigned char c)
{
    return c >= 0x80 || c == ' ' || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '{' ||
           c == '|' || c == '}';
}

// `text` made into what RFC 3986 (and so Boost.URL) accepts, the way a browser
// sends it: UTF-8 and the characters above percent-encoded, a '%' that starts
// no "%XX" written as "%25", and after the authority '[' and ']' (which only an
// IPv6 host may hold) and any '#' after the first encoded too; the authority
// starts at `authority_start` (npos: `text` has none). `origin[i]` is
// where byte i of the result came from in `text` (and origin.back() its size),
// so that the host can be read back as it was written.
struct Encoded {
    std::string text;
    std::vector<std::size_t> origin;
};

Encoded encode_for_parsing(std::string_view text, std::size_t authority_start)
{
    Encoded out;
    out.text.reserve(text.size() + 16);
    bool after_authority = authority_start == std::string_view::npos;
    bool in_fragment = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!after_authority && i >= authority_start && (c == '/' || c == '?' || c == '#')) {
            after_authority = true;
        }
        bool encode = never_literal(c);
        if (c == '%') {
            encode = i + 2 >= text.size() || !is_hex(text[i + 1]) || !is_hex(text[i + 2]);
        } else if (after_authority && (c == '[' || c == ']')) {
            encode = true;
        } else if (c == '#') {
            encode = in_fragment;
            in_fragment = true;
        }
        if (encode) {
            out.text += fmt::format("%{:02X}", c);
            out.origin.insert(out.origin.end(), 3, i);
        } else {
            out.text += static_cast<char>(c);
            out.origin.push_back(i);
        }
    }
    out.origin.push_back(text.size());
    return out;
}

// RFC 3986 6.2.2.1-2: hex digits of percent-encodings in upper case, and
// unreserved characters ("%7E", "%41", "%2E") decoded, so that each has one
// spelling. `encoded` is as Boost.URL validated it: every '%' starts "%XX".
std::string normal_percent_encoding(std::string_view encoded)
{
    std::string out;
    out.reserve(encoded.size());
    for (std::size_t i = 0; i < encoded.size(); ++i) {
        if (encoded[i] != '%' || i + 2 >= encoded.size()) {
            out += encoded[i];
            continue;
        }
        const auto byte = static_cast<unsigned char>(hex_value(encoded[i + 1]) * 16 + hex_value(encoded[i + 2]));
        if (is_unreserved(byte)) {
            out += static_cast<char>(byte);
        } else {
            out += fmt::format("%{:02X}", byte);
        }
        i += 2;
    }
    return out;
}

// Why Boost.URL refused a URL, in the words the checks of url_host.hpp use
// where the authority is what it refused.
std::string parse_failure(std::string_view authority, const boost::system::error_code& error)
{
    auto host = authority.substr(authority.rfind('@') == std::string_view::npos ? 0 : authority.rfind('@') + 1);
    if (!host.empty() && host.front() == '[') {
        return host.find(']') == std::string_view::npos ? "unterminated IPv6 address"
                                                        : "URL host is not a valid IPv6 address";
    }
    return fmt::format("URL is not well-formed (RFC 3986): {}", error.message());
}

UrlCheck refused(std::string error)
{
    UrlCheck result;
    result.error = std::move(error);
    return result;
}

bool valid_port(std::string_view port)
{
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) {
        return false;
    }
    const int n = std::stoi(std::string(port));
    return n > 0 && n <= 65535;
}

} // namespace

UrlCheck check_url(std::string_view text)
{
    if (text.empty()) {
        return refused("empty URL");
    }
    if (text.size() > k_max_url_length) {
        return refused(fmt::format("URL longer than {} bytes", k_max_url_length));
    }
    for (unsigned char c : text) {
        if (c <= 0x20 || c == 0x7f) {
            return refused("URL contains whitespace or control characters");
        }
    }
    if (!valid_utf8(text)) {
        return refused("URL is not valid UTF-8");
    }
    // The scheme first, only to name an unsupported one plainly.
    const auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) {
        return refused("not a URL (no scheme)");
    }
    const std::string scheme = lower(text.substr(0, colon));
    if (scheme != "http" && scheme != "https") {
        return refused(fmt::format("unsupported scheme '{}' (only http and https are archived)", printable(scheme, 40)));
    }
    if (text.substr(colon, 3) != "://") {
        return refused("URL must start with http:// or https://");
    }
    const auto authority_start = colon + 3;
    const auto encoded = encode_for_parsing(text, authority_start);
    std::string buffer = encoded.text;
    auto parsed = boost::urls::parse_uri(buffer);
    if (parsed && parsed->host_type() == boost::urls::host_type::ipv4) {
        // Boost 1.81 takes the IPv4 address at the start of a name as the whole
        // host ("1.2.3.4.test" is 1.2.3.4 and the path ".test"). Its digits are
        // then parsed as letters (same length, so the positions hold) and the
        // name is judged by normalise_host() as written.
        const auto begin = static_cast<std::size_t>(parsed->encoded_host().data() - buffer.data());
        const auto end = begin + parsed->encoded_host().size();
        if (end < buffer.size() && std::string_view(":/?#").find(buffer[end]) == std::string_view::npos) {
            const auto host_end = std::min(buffer.find_first_of(":/?#", begin), buffer.size());
            std::replace_if(buffer.begin() + static_cast<std::ptrdiff_t>(begin),
                            buffer.begin() + static_cast<std::ptrdiff_t>(host_end),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }, 'a');
            parsed = boost::urls::parse_uri(buffer);
        }
    }
    if (!parsed) {
        auto rest = text.substr(authority_start);
        return refused(parse_failure(rest.substr(0, rest.find_first_of("/?#")), parsed.error()));
    }
    const boost::urls::url_view& u = *parsed;
    // The host as it was written (UTF-8, not the percent-encoding made for the
    // parser): a '%' in it is the writer's own.
    const auto host_begin = static_cast<std::size_t>(u.encoded_host().data() - buffer.data());
    const auto host_end = host_begin + u.encoded_host().size();
    const auto written_host = text.substr(encoded.origin[host_begin], encoded.origin[host_end] - encoded.origin[host_begin]);
    if (written_host.empty()) {
        return refused("URL has no host");
    }
    if (u.host_type() == boost::urls::host_type::ipvfuture) {
        return refused("URL host is not a valid IPv6 address");
    }
    auto host = normalise_host(written_host);
    if (!host.host) {
        return refused(std::move(host.error));
    }
    std::string normalised = scheme + "://";
    if (u.has_userinfo()) {
        normalised += normal_percent_encoding(u.encoded_userinfo()) + "@";
    }
    normalised += *host.host;
    // RFC 3986 3.3: after an authority the path is empty or starts with '/'.
    // Boost 1.81 ends a port at its first non-digit and takes the rest as the
    // path ("a.test:8a/" has port 8 and path "a/").
    const bool path_follows = u.encoded_path().empty() || u.encoded_path().front() == '/';
    if (u.has_port()) {
        if (!path_follows || !valid_port(u.port())) {
            return refused("URL has an invalid port");
        }
        const std::string port = std::to_string(u.port_number());
        if (!((scheme == "http" && port == "80") || (scheme == "https" && port == "443"))) {
            normalised += ":" + port;
        }
    }
    if (!path_follows) {
        return refused("URL is not well-formed (RFC 3986): the path after the host must start with '/'");
    }
    // Dot segments are removed after decoding: "%2E" is a '.', for RFC 3986
    // (6.2.2.2) as for browsers. The query is the server's business: "/../"
    // in it is data, not a path step.
    const std::string path = remove_dot_segments(normal_percent_encoding(u.encoded_path()));
    normalised += path.empty() ? "/" : path;
    if (u.has_query()) {
        normalised += "?" + normal_percent_encoding(u.encoded_query());
    }
    UrlCheck result;
    result.valid = ValidUrl{normalised, scheme, std::move(*host.host)};
    return result;
}

std::string resolve_url(const std::string& base, const std::string& reference)
{
    const auto parsed_base = boost::urls::parse_uri(base);
    // A reference that is no URI reference even once encoded is returned as it
    // is, for check_url() to refuse with its reason.
    const auto scheme_end = reference.find("://");
    const auto authority_start = reference.rfind("//", 0) == 0   ? 2
                                 : scheme_end != std::string::npos ? scheme_end + 3
                                                                   : std::string::npos;
    const auto encoded = encode_for_parsing(reference, authority_start);
    const auto parsed_reference = boost::urls::parse_uri_reference(encoded.text);
    if (!parsed_base || !parsed_reference) {
        return reference;
    }
    boost::urls::url out;
    if (!boost::urls::resolve(*parsed_base, *parsed_reference, out)) {
        return reference;
    }
    // Boost 1.81 keeps a ".." that would climb above the root ("/../g");
    // RFC 3986 5.2.4 drops it.
    // (set_encoded_path() would write "/" as "/./", so the text is spliced.)
    std::string text(out.buffer());
    const auto path = out.encoded_path();
    const auto path_start = static_cast<std::size_t>(path.data() - out.buffer().data());
    return text.replace(path_start, path.size(), remove_dot_segments(path));
}

} // namespace orch
