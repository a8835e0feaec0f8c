#include "orchestrator/text_options.hpp"

#include "common/base/errors.hpp"
#include "common/base/utf8.hpp"

#include <fmt/format.h>

namespace orch {

void require_utf8_options(const CLI::App& cmd, std::initializer_list<const char*> names)
{
    for (const char* name : names) {
        const CLI::Option* option = cmd.get_option(name);
        for (const auto& value : option->results()) {
            if (auto at = find_invalid_utf8(value)) {
                // The value itself is not quoted: it is what the terminal cannot show.
                throw InvalidInput(fmt::format("{}: the value is not valid UTF-8 (byte 0x{:02x} at offset {}); "
                                               "give the text in UTF-8",
                                               name, static_cast<unsigned char>(value[*at]), *at));
            }
        }
    }
}

} // namespace orch
