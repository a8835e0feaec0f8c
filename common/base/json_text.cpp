#include "common/base/json_text.hpp"

#include "common/base/utf8.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

namespace orch::json_text {
namespace {

// How each byte is written inside a string literal: as is, escaped, or, for
// the bytes of non-ASCII characters, as is once the text is known to be UTF-8.
enum class ByteKind : unsigned char { plain, escaped, non_ascii };

struct ByteKinds {
    ByteKind kind[256] = {};
    constexpr ByteKinds()
    {
        for (int c = 0; c < 0x20; ++c) {
            kind[c] = ByteKind::escaped;
        }
        kind[static_cast<unsigned char>('"')] = ByteKind::escaped;
        kind[static_cast<unsigned char>('\\')] = ByteKind::escaped;
        for (int c = 0x80; c < 0x100; ++c) {
            kind[c] = ByteKind::non_ascii;
        }
    }
};
constexpr ByteKinds k_bytes;

// What nlohmann's serializer writes for an escaped byte when it does not escape
// non-ASCII (ensure_ascii false): the two-character escapes, \u00xx (lower-case
// hex) for the other control characters.
void append_escape(std::string& out, unsigned char c)
{
    static constexpr char k_hex[] = "0123456789abcdef";
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
        out += "\\u00";
        out += k_hex[c >> 4];
        out += k_hex[c & 0xF];
    }
}

// Whether any of the 8 bytes of `word` is not plain (below 0x20, '"', '\\' or
// 0x80 and above): the usual bit tricks, so that long plain runs (paths, PATH)
// are skipped 8 bytes at a time.
bool has_special_byte(std::uint64_t word)
{
    constexpr std::uint64_t k_ones = 0x0101010101010101ull;
    constexpr std::uint64_t k_highs = 0x8080808080808080ull;
    const auto zero_byte = [](std::uint64_t x) { return (x - k_ones) & ~x & k_highs; };
    const std::uint64_t control = (word - k_ones * 0x20) & ~word & k_highs; // a byte < 0x20
    return ((word & k_highs) | control | zero_byte(word ^ (k_ones * '"')) | zero_byte(word ^ (k_ones * '\\'))) != 0;
}

} // namespace

void append_string(std::string& out, std::string_view text)
{
    const std::size_t start = out.size();
    out += '"';
    bool utf8_checked = false;
    std::size_t run = 0; // the first byte not yet copied
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (i + 8 <= text.size()) {
            std::uint64_t word;
            std::memcpy(&word, text.data() + i, sizeof word);
            if (!has_special_byte(word)) {
                i += 7;
                continue;
            }
        }
        const auto c = static_cast<unsigned char>(text[i]);
        const ByteKind kind = k_bytes.kind[c];
        if (kind == ByteKind::plain) {
            continue;
        }
        if (kind == ByteKind::non_ascii) {
            if (!utf8_checked) {
                if (!is_valid_utf8(text.substr(i))) {
                    // nlohmann's own replacement of what is not UTF-8, byte for byte.
                    out.resize(start);
                    out += nlohmann::json(std::string(text))
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
                    return;
                }
                utf8_checked = true;
            }
            continue;
        }
        out.append(text.data() + run, i - run);
        run = i + 1;
        append_escape(out, c);
    }
    out.append(text.data() + run, text.size() - run);
    out += '"';
}

void append_string_or_null(std::string& out, const std::optional<std::string>& text)
{
    if (text) {
        append_string(out, *text);
    } else {
        out += "null";
    }
}

void append_string_array(std::string& out, const std::vector<std::string>& items)
{
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        append_string(out, items[i]);
    }
    out += ']';
}

void append_string_object(std::string& out, const std::map<std::string, std::string>& items)
{
    out += '{';
    bool first = true;
    for (const auto& [key, value] : items) {
        if (!first) {
            out += ',';
        }
        first = false;
        append_key(out, key);
        append_string(out, value);
    }
    out += '}';
}

void append_number(std::string& out, double value)
{
    if (!std::isfinite(value)) {
        out += "null";
        return;
    }
    fmt::format_to(std::back_inserter(out), "{}", value);
}

void append_key(std::string& out, std::string_view key)
{
    append_string(out, key);
    out += ':';
}

} // namespace orch::json_text
