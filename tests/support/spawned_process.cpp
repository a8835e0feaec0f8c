#include "tests/support/spawned_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace orch::test {
namespace {

std::string slurp(const std::filesystem::path& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int make_temp(std::filesystem::path& path, const char* prefix)
{
    std::string templ = std::string("/tmp/") + prefix + "XXXXXX";
    int fd = ::mkstemp(templ.data());
    if (fd < 0) {
        throw std::runtime_error("mkstemp failed");
    }
    path = templ;
    return fd;
}

} // namespace

SpawnedProcess::SpawnedProcess(const std::vector<std::string>& argv, const EnvChanges& env)
{
    int out_fd = make_temp(m_out, "orch-spawn-out-");
    int err_fd = make_temp(m_err, "orch-spawn-err-");
    m_pid = ::fork();
    if (m_pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (m_pid == 0) {
        int null_fd = ::open("/dev/null", O_RDONLY);
        ::dup2(null_fd, 0);
        ::dup2(out_fd, 1);
        ::dup2(err_fd, 2);
        for (const auto& [name, value] : env) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
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
    ::close(out_fd);
    ::close(err_fd);
}

SpawnedProcess::~SpawnedProcess()
{
    if (m_pid > 0 && !m_exited) {
        ::kill(m_pid, SIGKILL);
        int status = 0;
        while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    std::error_code ec;
    std::filesystem::remove(m_out, ec);
    std::filesystem::remove(m_err, ec);
}

void SpawnedProcess::sample_rss()
{
    std::ifstream in("/proc/" + std::to_string(m_pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
            long kb = std::atol(line.c_str() + 6);
            m_peak_rss_kb = std::max(m_peak_rss_kb, kb);
        }
    }
}

bool SpawnedProcess::wait_for(std::chrono::milliseconds timeout)
{
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!m_exited) {
        sample_rss();
        int status = 0;
        pid_t r = ::waitpid(m_pid, &status, WNOHANG);
        if (r == m_pid) {
            m_exited = true;
            if (WIFEXITED(status)) {
                m_exit_code = WEXITSTATUS(status);
            } else if (WIFSIGNALED(status)) {
                m_signal = WTERMSIG(status);
            }
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

void SpawnedProcess::signal(int sig) const
{
    if (!m_exited) {
        ::kill(m_pid, sig);
    }
}

std::string SpawnedProcess::out() const
{
    return slurp(m_out);
}

std::string SpawnedProcess::err() const
{
    return slurp(m_err);
}

} // namespace orch::test
