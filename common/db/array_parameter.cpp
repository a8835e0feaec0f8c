#include "common/db/array_parameter.hpp"

namespace orch {

std::string array_parameter(const std::vector<std::string>& elements)
{
    std::string out = "{";
    for (const auto& element : elements) {
        if (out.size() > 1) {
            out += ',';
        }
        out += '"';
        for (const char c : element) {
            if (c == '"' || c == '\\') {
                out += '\\';
            }
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

} // namespace orch
