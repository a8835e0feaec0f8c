#include "common/supervision/rerun_script.hpp"

#include "common/base/errors.hpp"
#include "common/base/fd.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

// The bytes a shell word may hold unquoted: ASCII letters and digits, @%+=:,./-_.
// A table, not isalnum() and a search per byte: every hook's cmd.sh quotes its
// whole environment.
struct PlainBytes {
    bool plain[256] = {};
    constexpr PlainBytes()
    {
        for (int c = '0'; c <= '9'; ++c) {
            plain[c] = true;
        }
        for (int c = 'a'; c <= 'z'; ++c) {
            plain[c] = true;
            plain[c - 'a' + 'A'] = true;
        }
        for (const char c : std::string_view("@%+=:,./-_")) {
            plain[static_cast<unsigned char>(c)] = true;
        }
    }
};
constexpr PlainBytes k_plain_bytes;

// Appends `word` to `out` as one shell word.
void append_quoted(std::string& out, std::string_view word)
{
    if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
            return k_plain_bytes.plain[static_cast<unsigned char>(c)];
        })) {
        out.append(word);
        return;
    }
    // Inside single quotes nothing is special except the quote itself.
    out += '\'';
    for (std::size_t start = 0;;) {
        const auto quote = word.find('\'', start);
        out.append(word.substr(start, quote - start));
        if (quote == std::string_view::npos) {
            break;
        }
        out += "'\\''";
        start = quote + 1;
    }
    out += '\'';
}

} // namespace

std::string shell_quote(std::string_view word)
{
    std::string out;
    append_quoted(out, word);
    return out;
}

void write_rerun_script(const std::filesystem::path& path, const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env, const std::filesystem::path& pwd,
                        const std::vector<std::string>& from_caller)
{
    std::string script = "#!/bin/sh\n# Reruns this process with the environment it was given.\ncd ";
    append_quoted(script, pwd.native());
    script += " || exit 1\nexec env -i";
    std::string assignment;
    for (const auto& [key, value] : env) {
        script += " \\\n  ";
        if (std::find(from_caller.begin(), from_caller.end(), key) != from_caller.end()) {
            script.append(key).append("=\"${").append(key).append("}\"");
            continue;
        }
        assignment.assign(key).append("=").append(value);
        append_quoted(script, assignment);
    }
    for (const auto& word : argv) {
        script += " \\\n  ";
        append_quoted(script, word);
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
