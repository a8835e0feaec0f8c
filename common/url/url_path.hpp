#pragma once

#include <string>
#include <string_view>

namespace orch {

// `path` (the path of a URL, without query or fragment) with its "." and ".."
// segments removed as RFC 3986 section 5.2.4 says: "/a/./b/../c" is "/a/c",
// "/.." is "/", "/a/.." is "/". Only literal dots count: "%2e" is left alone.
// Never throws except std::bad_alloc.
std::string remove_dot_segments(std::string_view path);

} // namespace orch
