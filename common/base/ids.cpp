#include "common/base/ids.hpp"
#include "common/base/printable.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <cctype>

namespace orch {

bool is_uuid(std::string_view text)
{
    if (text.size() != 36) {
        return false;
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) {
            return false;
        }
    }
    return true;
}

std::string require_uuid(std::string_view text, std::string_view what)
{
    if (!is_uuid(text)) {
        throw InvalidInput(fmt::format("{} '{}' is not a valid id (expected a UUID like "
                                       "3f2b8c1e-0d4a-4c3e-9a51-2f6c7d8e9a0b)",
                                       what, printable(text, 80)));
    }
    std::string out(text);
    for (auto& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

std::optional<std::string> optional_uuid(std::string_view text, std::string_view what)
{
    if (text.empty()) {
        return std::nullopt;
    }
    return require_uuid(text, what);
}

} // namespace orch
