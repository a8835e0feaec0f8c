#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

// Parsing JSON text that an untrusted party wrote (hook stdout, plugin
// config.json) with limits checked before nlohmann::json sees the text, so
// hostile input costs bounded time and memory and yields a readable message.
namespace orch {

inline constexpr std::size_t k_max_json_depth = 64;

// Thrown by parse_bounded_json; what() is one line of valid UTF-8 suitable for
// a log line or an archive_result error column.
struct JsonInputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Deepest nesting of [ and { outside string literals (0 for a scalar). Does
// not validate; a single linear scan.
std::size_t json_nesting_depth(std::string_view text);

// Parses `text` as one JSON value. Throws JsonInputError for: nesting deeper
// than `max_depth`, ill-formed UTF-8 (message names the byte offset), or any
// syntax error (nlohmann's message, sanitized and shortened).
nlohmann::json parse_bounded_json(std::string_view text, std::size_t max_depth = k_max_json_depth);

} // namespace orch
