#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

// UTF-8 validation for text that came from hooks (stdout records, file names)
// before it reaches nlohmann::json::dump() or the database, both of which
// reject ill-formed UTF-8. Pure functions; never throw except std::bad_alloc.
namespace orch {

// Byte offset of the first ill-formed sequence (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or nullopt when `text` is valid UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) { return !find_invalid_utf8(text).has_value(); }

// Copy of `text` with every ill-formed byte replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);

// `text` without U+0000, which PostgreSQL's text and jsonb cannot hold (a hook
// may print it; as a JSON parameter it would fail the whole statement).
std::string without_nul(std::string text);

} // namespace orch
