#include "common/url/url_host.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <idn2.h>
#include <netinet/in.h>

#include <algorithm>
#include <memory>

namespace orch {
namespace {

struct Idn2Free {
    void operator()(char* p) const noexcept { idn2_free(p); }
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The ASCII characters a host name may have: letters, digits, '-' and '.', plus
// '_' and '~', which real names use (service records, some intranets) and were
// always accepted. Anything else would be another URL part in disguise.
bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

bool is_ascii(std::string_view s)
{
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string ascii_lower(std::string_view s)
{
    std::string out(s);
    for (auto& c : out) {
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
    }
    return out;
}

// The WHATWG URL rule: a name whose last label is a number ("1.2.3", "10",
// "0x7f") is read as an IPv4 address by resolvers (inet_aton), never looked up
// as a name. We accept only the plain dotted-quad form of such hosts.
bool ends_in_number(std::string_view name)
{
    auto last = name.substr(name.rfind('.') + 1);
    if (!last.empty() && std::all_of(last.begin(), last.end(), is_digit)) {
        return true;
    }
    return last.size() >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') &&
           std::all_of(last.begin() + 2, last.end(), is_hex_digit);
}

HostCheck refused(std::string error)
{
    HostCheck check;
    check.error = std::move(error);
    return check;
}

HostCheck accepted(std::string host)
{
    HostCheck check;
    check.host = std::move(host);
    return check;
}

HostCheck normalise_ipv6(std::string_view bracketed)
{
    std::string inner(bracketed.substr(1, bracketed.size() - 2));
    in6_addr address{};
    if (inet_pton(AF_INET6, inner.c_str(), &address) != 1) {
        return refused("URL host is not a valid IPv6 address");
    }
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &address, text, sizeof text);
    return accepted(fmt::format("[{}]", text));
}

HostCheck normalise_ipv4(const std::string& name)
{
    in_addr address{};
    if (inet_pton(AF_INET, name.c_str(), &address) != 1) {
        return refused("URL host ends in a number but is not an IPv4 address (four decimal numbers 0-255 expected)");
    }
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &address, text, sizeof text);
    return accepted(text);
}

} // namespace

HostCheck normalise_host(std::string_view host)
{
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        return normalise_ipv6(host);
    }
    // Decoding "%41" would give a host a second spelling that the database's
    // url_host() (which reads the stored URL as it is) would not fold, and
    // browsers and servers disagree on what a decoded '%2e' or '%00' means.
    if (host.find('%') != std::string_view::npos) {
        return refused("URL host contains '%' (percent-encoded hosts are not accepted)");
    }
    auto valid_chars = [](std::string_view name) {
        return std::all_of(name.begin(), name.end(),
                           [](char c) { return name_char(c) || static_cast<unsigned char>(c) >= 0x80; });
    };
    if (!valid_chars(host)) {
        return refused("URL host contains invalid characters");
    }
    std::string name;
    if (is_ascii(host)) {
        name = ascii_lower(host);
    } else {
        char* raw = nullptr;
        int rc = idn2_to_ascii_8z(std::string(host).c_str(), &raw, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
        std::unique_ptr<char, Idn2Free> ascii(raw);
        if (rc != IDN2_OK) {
            return refused(fmt::format("URL host is not a valid internationalised domain name: {}", idn2_strerror(rc)));
        }
        // The mapping lower-cases, and turns full-width forms into ASCII: a
        // full-width '/' or ':' must not become part of the host.
        name = ascii_lower(ascii.get());
        if (!std::all_of(name.begin(), name.end(), name_char)) {
            return refused("URL host contains characters that IDNA maps to invalid ones");
        }
    }
    if (!name.empty() && name.back() == '.') {
        name.pop_back();
    }
    if (name.size() > k_max_host_length) {
        return refused(fmt::format("URL host is longer than {} bytes", k_max_host_length));
    }
    for (std::size_t start = 0; start <= name.size();) {
        auto end = std::min(name.find('.', start), name.size());
        std::string_view label(name.data() + start, end - start);
        if (label.empty()) {
            return refused("URL host has an empty label (two dots in a row, or a leading dot)");
        }
        if (label.size() > k_max_label_length) {
            return refused(fmt::format("URL host has a label longer than {} bytes", k_max_label_length));
        }
        if (label.front() == '-' || label.back() == '-') {
            return refused("URL host has a label that starts or ends with '-'");
        }
        start = end + 1;
    }
    if (ends_in_number(name)) {
        return normalise_ipv4(name);
    }
    return accepted(std::move(name));
}

} // namespace orch
