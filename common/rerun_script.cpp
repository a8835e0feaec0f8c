#include "common/rerun_script.hpp"

#include "common/errors.hpp"

#include <algorithm>
#include <fstream>

#include <sys/stat.h>

namespace orch {

std::string shell_quote(std::string_view word)
{
    if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("@%+=:,./-_").find(c) != std::string_view::npos;
        })) {
        return std::string(word);
    }
    // Inside single quotes nothing is special except the quote itself.
    std::string quoted = "'";
    for (char c : word) {
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return quoted + "'";
}

void write_rerun_script(const std::filesystem::path& path, const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env, const std::filesystem::path& pwd,
                        const std::vector<std::string>& from_caller)
{
    std::ofstream out(path, std::ios::trunc);
    out << "#!/bin/sh\n# Reruns this process with the environment it was given.\n";
    out << "cd " << shell_quote(pwd.string()) << " || exit 1\nexec env -i";
    for (const auto& [key, value] : env) {
        const bool secret = std::find(from_caller.begin(), from_caller.end(), key) != from_caller.end();
        out << " \\\n  " << (secret ? key + "=\"${" + key + "}\"" : shell_quote(key + "=" + value));
    }
    for (const auto& word : argv) {
        out << " \\\n  " << shell_quote(word);
    }
    out << "\n";
    out.close();
    if (!out) {
        throw std::system_error(errno ? errno : EIO, std::generic_category(), "write " + path.string());
    }
    if (::chmod(path.c_str(), 0755) != 0) {
        throw_errno("chmod " + path.string());
    }
}

} // namespace orch
