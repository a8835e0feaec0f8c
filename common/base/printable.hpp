#pragma once

#include <string>
#include <string_view>

namespace orch {

// Printable form of an arbitrary (possibly binary or huge) value for error
// messages: control and non-ASCII bytes escaped, cut at `max_length`. Pure.
std::string printable(std::string_view value, std::size_t max_length = 200);

} // namespace orch
