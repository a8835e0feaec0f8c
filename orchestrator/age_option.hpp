#pragma once

#include <optional>
#include <string>

namespace orch {

// An age given on the command line ("30d", "12h", "90m", "45s", "2w") as a
// PostgreSQL interval literal ("30 days"), for a `$n::interval` parameter.
// Throws InvalidInput naming `option` (e.g. "--older-than") when `text` is not
// a positive whole number followed by one of the units s, m, h, d, w, or is
// longer than 100 years (36525d).
std::string parse_age(const std::string& text, const std::string& option);

// An age option that may be absent (empty: not given): nullopt, else parse_age().
std::optional<std::string> optional_age(const std::string& text, const std::string& option);

} // namespace orch
