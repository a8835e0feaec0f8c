#pragma once

#include <string>

namespace orch {

// `v` as one value of a libpq keyword/value connection string: in single
// quotes, with quotes and backslashes escaped, so that spaces, quotes and
// empty values survive. Throws nothing but std::bad_alloc.
std::string quote_conninfo_value(const std::string& v);

} // namespace orch
