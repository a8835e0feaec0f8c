#include "common/base/random_id.hpp"

#include "common/base/errors.hpp"

#include <array>
#include <cstdint>

#include <sys/random.h>

namespace orch {

std::string random_uuid()
{
    std::array<std::uint8_t, 16> bytes{};
    if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
        throw_errno("getrandom");
    }
    bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0f) | 0x40);
    bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3f) | 0x80);
    // Hex by table: snprintf with sixteen conversions cost 3k instructions,
    // and every hook takes two ids (its row and its cookie).
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string text;
    text.reserve(36);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            text += '-';
        }
        text += k_hex[bytes[i] >> 4];
        text += k_hex[bytes[i] & 0x0f];
    }
    return text;
}

} // namespace orch
