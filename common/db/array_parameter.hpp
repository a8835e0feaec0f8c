#pragma once

#include <string>
#include <vector>

namespace orch {

// `elements` as a PostgreSQL array literal ("{"a","b"}") for one text[] or
// uuid[] parameter ($n::uuid[]): the values travel as a parameter, never
// spliced into a statement. Every element is quoted, with `"` and `\` escaped,
// so any text is taken as it is. "{}" for none.
std::string array_parameter(const std::vector<std::string>& elements);

} // namespace orch
