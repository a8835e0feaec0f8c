#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace orch {

// True for the canonical 36-character textual UUID form (any case).
bool is_uuid(std::string_view text);

// Returns `text` lower-cased if it is a UUID; throws InvalidInput naming `what` otherwise.
std::string require_uuid(std::string_view text, std::string_view what);

// An optional id (an option not given is empty): nullopt when `text` is empty,
// else require_uuid(text, what).
std::optional<std::string> optional_uuid(std::string_view text, std::string_view what);

} // namespace orch
