#include "common/base/utf8.hpp"

#include <algorithm>

namespace orch {
namespace {

// Length of the well-formed sequence starting at text[i], or 0 if ill-formed.
// Ranges from RFC 3629 section 4, which is what nlohmann's lexer enforces too.
std::size_t sequence_length(std::string_view text, std::size_t i)
{
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    auto in = [&](std::size_t k, unsigned lo, unsigned hi) {
        return k < text.size() && byte(k) >= lo && byte(k) <= hi;
    };
    unsigned char b0 = byte(i);
    if (b0 < 0x80) {
        return 1;
    }
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return in(i + 1, 0x80, 0xBF) ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80;
        unsigned hi = b0 == 0xED ? 0x9F : 0xBF; // 0xED 0xA0.. would encode a surrogate
        return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        unsigned lo = b0 == 0xF0 ? 0x90 : 0x80;
        unsigned hi = b0 == 0xF4 ? 0x8F : 0xBF; // keeps code points <= U+10FFFF
        return in(i + 1, lo, hi) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    }
    return 0;
}

} // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view text)
{
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = sequence_length(text, i);
        if (n == 0) {
            return i;
        }
        i += n;
    }
    return std::nullopt;
}

std::string sanitize_utf8(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = sequence_length(text, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

std::string without_nul(std::string text)
{
    text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
    return text;
}

} // namespace orch
