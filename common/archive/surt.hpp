#pragma once

#include <string>
#include <string_view>

// The SURT (Sort-friendly URI Reordering Transform) key of a URL, as replay
// tools look URLs up in a CDXJ index: "https://www.Example.com:8443/A?b=2&a=1#x"
// -> "com,example:8443)/a?a=1&b=2".
namespace orch {

// For http(s) URLs: scheme, user info and fragment dropped; the whole key
// lowercased; the host's labels reversed and joined by ',' with a leading
// "www" (or "www2", ...) label dropped from a host of three labels or more; the port kept unless it is the
// scheme's default; the path ("/" when empty) after ')'; the query's
// '&'-separated arguments sorted bytewise, an empty query dropped.
// Any other URL (dns:, urn:, ...) is returned lowercased, as it is.
std::string surt_key(std::string_view url);

} // namespace orch
