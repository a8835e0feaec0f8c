#pragma once

#include <string>
#include <string_view>

namespace orch {

// True for the canonical 36-character textual UUID form (any case).
bool is_uuid(std::string_view text);

// Returns `text` lower-cased if it is a UUID; throws InvalidInput naming `what` otherwise.
std::string require_uuid(std::string_view text, std::string_view what);

} // namespace orch
