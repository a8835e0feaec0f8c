#include "common/base/bounded_json.hpp"

#include "common/base/utf8.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

constexpr std::size_t k_max_message_bytes = 300;

// nlohmann's parse_error text quotes the raw input it choked on ("last read:
// '...'"), which may itself be binary garbage; keep messages short and valid.
std::string clean_message(std::string_view message)
{
    std::string out = sanitize_utf8(message.substr(0, k_max_message_bytes));
    if (message.size() > k_max_message_bytes) {
        out += "...";
    }
    for (char& c : out) {
        if (c == '\n' || c == '\r') {
            c = ' ';
        }
    }
    return out;
}

} // namespace

std::size_t json_nesting_depth(std::string_view text)
{
    std::size_t depth = 0;
    std::size_t deepest = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        switch (c) {
        case '"': in_string = true; break;
        case '[':
        case '{':
            if (++depth > deepest) {
                deepest = depth;
            }
            break;
        case ']':
        case '}':
            if (depth > 0) {
                --depth;
            }
            break;
        default: break;
        }
    }
    return deepest;
}

nlohmann::json parse_bounded_json(std::string_view text, std::size_t max_depth)
{
    if (json_nesting_depth(text) > max_depth) {
        throw JsonInputError(fmt::format("JSON nesting deeper than {} levels", max_depth));
    }
    if (auto bad = find_invalid_utf8(text)) {
        throw JsonInputError(fmt::format("invalid UTF-8 at byte {}", *bad + 1));
    }
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        throw JsonInputError(clean_message(e.what()));
    }
}

} // namespace orch
