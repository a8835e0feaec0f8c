#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace orch {

// The one spelling of a URL's host that the snapshot URL, ValidUrl::host and
// the database's url_host() all use, so that one site is one seed and one host
// for the per-host rules:
// - a registered name in lower-case ASCII: a name with non-ASCII characters is
//   converted to its A-labels by IDNA2008 with the UTS #46 mapping
//   ("BÜCHER.example" and "bücher.example" are "xn--bcher-kva.example");
// - an IPv4 address as four decimal numbers;
// - an IPv6 address in brackets, in the canonical text form of inet_ntop.
// One trailing "." (the DNS root) is dropped: "example.com." is "example.com".
struct HostCheck {
    std::optional<std::string> host;
    std::string error; // why the host was refused, when `host` is empty
};

constexpr std::size_t k_max_host_length = 253;
constexpr std::size_t k_max_label_length = 63;

// Refuses: '%' (percent-encoded hosts), a name IDNA refuses (with libidn2's
// reason), an empty label, a label over 63 bytes or starting or ending with
// '-', a name over 253 bytes, a name ending in a number that is not an IPv4
// address ("999.1.1.1", "1.2.3", "0x7f.1"), a bracketed host that is not an
// IPv6 address. `host` is the text between "//" (and any user info) and the
// port, in brackets for IPv6. Never throws except std::bad_alloc.
HostCheck normalise_host(std::string_view host);

} // namespace orch
