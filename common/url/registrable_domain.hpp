#pragma once

#include <string>
#include <string_view>

namespace orch {

// The registrable domain of `host` (as normalise_host() spells it): the public
// suffix it ends in, by the Public Suffix List with its private section
// (libpsl), and the one label before it. "a.example.co.uk" and
// "b.example.co.uk" share "example.co.uk"; "x.github.io" and "y.github.io" are
// registrable domains of their own (github.io is a suffix).
// A host that has none is its own: an IP address, a name that is itself a
// public suffix ("co.uk"), a single label ("localhost").
// The list is the newer of libpsl's built-in one and the system's
// (/usr/share/publicsuffix, Debian's publicsuffix package), loaded once.
// Thread-safe; never throws except std::bad_alloc.
std::string registrable_domain(std::string_view host);

} // namespace orch
