#include "common/supervision/command_line.hpp"

#include "common/supervision/child_environment.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace orch {
namespace {

constexpr const char* k_redacted = "<redacted>";

// "postgresql://user:pw@host/db" -> "postgresql://user:<redacted>@host/db";
// anything else (including a conninfo string) is returned unchanged.
std::string mask_url_password(const std::string& arg)
{
    const auto scheme = arg.find("://");
    if (scheme == std::string::npos) {
        return arg;
    }
    const auto authority = scheme + 3;
    const auto at = arg.find('@', authority);
    const auto slash = arg.find('/', authority);
    if (at == std::string::npos || (slash != std::string::npos && slash < at)) {
        return arg;
    }
    const auto colon = arg.find(':', authority);
    if (colon == std::string::npos || colon > at) {
        return arg;
    }
    return arg.substr(0, colon + 1) + k_redacted + arg.substr(at);
}

} // namespace

bool is_secret_option(const std::string& option)
{
    auto name = option;
    name.erase(0, name.find_first_not_of('-'));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return c == '-' ? '_' : static_cast<char>(std::toupper(c)); });
    if (name.empty()) {
        return false;
    }
    return is_secret_variable(name) || name.find("DATABASE") != std::string::npos || name == "DB_URL" ||
           name == "DSN";
}

std::vector<std::string> redact_command_line(std::vector<std::string> argv)
{
    bool redact_next = false;
    for (std::size_t i = 0; i < argv.size(); ++i) {
        auto& arg = argv[i];
        if (redact_next) {
            arg = k_redacted;
            redact_next = false;
            continue;
        }
        if (i > 0 && arg.rfind("-", 0) == 0) {
            const auto eq = arg.find('=');
            const auto option = arg.substr(0, eq);
            if (is_secret_option(option)) {
                if (eq == std::string::npos) {
                    redact_next = true;
                } else {
                    arg = option + "=" + k_redacted;
                }
                continue;
            }
        }
        arg = mask_url_password(arg);
    }
    return argv;
}

void hide_secret_arguments(int argc, char** argv)
{
    const std::vector<std::string> original(argv, argv + argc);
    const auto hidden = redact_command_line(original);
    for (int i = 0; i < argc; ++i) {
        const auto& before = original[static_cast<std::size_t>(i)];
        const auto& after = hidden[static_cast<std::size_t>(i)];
        if (before == after) {
            continue;
        }
        const auto keep = static_cast<std::size_t>(
            std::mismatch(before.begin(), before.end(), after.begin(), after.end()).first - before.begin());
        std::fill(argv[i] + keep, argv[i] + before.size(), 'x');
    }
}

std::vector<std::string> own_command_line()
{
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> argv;
    std::string word;
    while (std::getline(in, word, '\0')) {
        argv.push_back(word);
    }
    return redact_command_line(std::move(argv));
}

} // namespace orch
