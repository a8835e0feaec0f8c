#include "common/rerun_script.hpp"

#include "common/errors.hpp"
#include "common/fd.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
    std::string script = "#!/bin/sh\n# Reruns this process with the environment it was given.\n";
    script += "cd " + shell_quote(pwd.string()) + " || exit 1\nexec env -i";
    for (const auto& [key, value] : env) {
        const bool secret = std::find(from_caller.begin(), from_caller.end(), key) != from_caller.end();
        script += " \\\n  " + (secret ? key + "=\"${" + key + "}\"" : shell_quote(key + "=" + value));
    }
    for (const auto& word : argv) {
        script += " \\\n  " + shell_quote(word);
    }
    script += "\n";
    // Created executable (within the umask): one for every hook, and a chmod
    // after the write cost an inode update more each (a journal entry on ext4).
    // A file left by an earlier run of the same row is made executable again.
    bool created = true;
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755));
    if (!fd && errno == EEXIST) {
        created = false;
        fd.reset(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    }
    if (!fd) {
        throw_errno("open " + path.string());
    }
    std::size_t done = 0;
    while (done < script.size()) {
        const auto n = ::write(fd.get(), script.data() + done, script.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw_errno("write " + path.string());
        }
        done += static_cast<std::size_t>(n);
    }
    if (!created && ::fchmod(fd.get(), 0755) != 0) {
        throw_errno("chmod " + path.string());
    }
    if (::close(fd.release()) != 0) {
        throw_errno("write " + path.string());
    }
}

} // namespace orch
