#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// JSON text appended straight to a string, for the JSON parameters of the hot
// statements (a snapshot's process rows, its held results). nlohmann::json
// builds a tree first (a node and a copy per value) and then dumps it through a
// byte-by-byte UTF-8 decoder: the three process rows of a snapshot took more
// instructions to serialise than anything else its worker did (callgrind, bench
// row 2). The text is the same as nlohmann's dump(-1, ' ', false,
// error_handler_t::replace) gives for the same values: strings are escaped the
// same way, and a string that is not valid UTF-8 goes through nlohmann itself,
// so its replacement characters are exactly nlohmann's. Never throws except
// std::bad_alloc.
namespace orch::json_text {

// `text` as a JSON string literal, quotes included.
void append_string(std::string& out, std::string_view text);
// The literal, or null.
void append_string_or_null(std::string& out, const std::optional<std::string>& text);
// ["a", ...] / {"k": "v", ...} in the map's order, as nlohmann writes them (no spaces).
void append_string_array(std::string& out, const std::vector<std::string>& items);
void append_string_object(std::string& out, const std::map<std::string, std::string>& items);
// A JSON number for a finite double (shortest form that reads back the same),
// null for NaN and infinities (JSON has no spelling for them).
void append_number(std::string& out, double value);
// `"key":` (the key escaped), to start a member of an object being written.
void append_key(std::string& out, std::string_view key);

} // namespace orch::json_text
