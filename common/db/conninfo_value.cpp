#include "common/db/conninfo_value.hpp"

namespace orch {

std::string quote_conninfo_value(const std::string& v)
{
    std::string out = "'";
    for (char c : v) {
        if (c == '\'' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out + "'";
}

} // namespace orch
