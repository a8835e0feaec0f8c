#include "tests/support/command_runner.hpp"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace orch::test {
namespace {

std::string slurp(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

CommandResult run_command(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const std::string& input)
{
    char out_tmpl[] = "/tmp/orch-cmd-out-XXXXXX";
    char err_tmpl[] = "/tmp/orch-cmd-err-XXXXXX";
    char in_tmpl[] = "/tmp/orch-cmd-in-XXXXXX";
    int out_fd = ::mkstemp(out_tmpl);
    int err_fd = ::mkstemp(err_tmpl);
    int in_fd = ::mkstemp(in_tmpl);
    if (out_fd < 0 || err_fd < 0 || in_fd < 0) {
        throw std::runtime_error("mkstemp failed");
    }
    if (!input.empty() && ::write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
        throw std::runtime_error("write failed");
    }
    ::lseek(in_fd, 0, SEEK_SET);
    pid_t pid = ::fork();
    if (pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        ::dup2(in_fd, 0);
        ::dup2(out_fd, 1);
        ::dup2(err_fd, 2);
        for (const auto& [k, v] : env) {
            if (v.empty()) {
                ::unsetenv(k.c_str());
            } else {
                ::setenv(k.c_str(), v.c_str(), 1);
            }
        }
        std::vector<char*> args;
        for (const auto& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        std::perror("execv");
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
    CommandResult r;
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
    }
    ::close(out_fd);
    ::close(err_fd);
    ::close(in_fd);
    r.out = slurp(out_tmpl);
    r.err = slurp(err_tmpl);
    ::unlink(out_tmpl);
    ::unlink(err_tmpl);
    ::unlink(in_tmpl);
    return r;
}

} // namespace orch::test
