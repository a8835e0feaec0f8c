#include "common/base/printable.hpp"

#include <fmt/format.h>

namespace orch {

std::string printable(std::string_view value, std::size_t max_length)
{
    std::string out;
    for (std::size_t i = 0; i < value.size() && out.size() < max_length; ++i) {
        auto c = static_cast<unsigned char>(value[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f || c >= 0x80) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    if (out.size() >= max_length && value.size() > max_length) {
        out += fmt::format("... ({} bytes)", value.size());
    }
    return out;
}

} // namespace orch
