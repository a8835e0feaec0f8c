#include "tests/crawl/crawl_fixture.hpp"

#include "tests/support/db_query.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace orch::test {
namespace {

namespace fs = std::filesystem;

} // namespace

std::string read_text(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> read_lines(const fs::path& path)
{
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

CrawlWorkerProcess::CrawlWorkerProcess(const std::vector<std::string>& argv, const CrawlEnv& env, fs::path log)
    : m_log(std::move(log))
{
    std::vector<std::string> args = argv;
    m_pid = ::fork();
    if (m_pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (m_pid == 0) {
        int in = ::open("/dev/null", O_RDONLY);
        int out = ::open(m_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (in < 0 || out < 0) {
            ::_exit(127);
        }
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        for (const auto& [key, value] : env) {
            if (value) {
                ::setenv(key.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(key.c_str());
            }
        }
        std::vector<char*> c_args;
        for (auto& a : args) {
            c_args.push_back(a.data());
        }
        c_args.push_back(nullptr);
        ::execv(c_args[0], c_args.data());
        ::_exit(127);
    }
}

CrawlWorkerProcess::~CrawlWorkerProcess()
{
    if (!m_exited && m_pid > 0) {
        ::kill(m_pid, SIGKILL);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
    }
}

bool CrawlWorkerProcess::wait_for(std::chrono::milliseconds timeout)
{
    return poll_until(
        [&] {
            if (m_exited) {
                return true;
            }
            int status = 0;
            if (::waitpid(m_pid, &status, WNOHANG) != m_pid) {
                return false;
            }
            m_exited = true;
            m_exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            m_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            return true;
        },
        timeout);
}

void CrawlWorkerProcess::signal(int sig) const
{
    if (!m_exited) {
        ::kill(m_pid, sig);
    }
}

std::string CrawlWorkerProcess::output() const
{
    return read_text(m_log);
}

CrawlFixture::CrawlFixture() : ScratchArchive("orch-cw-") {}

std::vector<std::string> CrawlFixture::site_urls(int n)
{
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) {
        out.push_back("http://site.test/" + std::to_string(i));
    }
    return out;
}

CrawlEnv CrawlFixture::env(const CrawlEnv& extra) const
{
    CrawlEnv e = {{"ORCH_BUILTIN_PLUGINS_DIR", ""},
                  {"PLUGINS_DIR", plugins.string()},
                  {"TEARDOWN_GRACE", "1"},
                  {"DATABASE_URL", std::nullopt},
                  {"DATA_DIR", std::nullopt},
                  {"MAX_SNAPSHOT_WORKERS", std::nullopt},
                  {"SNAPSHOT_MAX_ATTEMPTS", std::nullopt},
                  {"ORCH_PROCESS_COOKIE", std::nullopt},
                  {"ORCH_PROCESS_ID", std::nullopt}};
    for (const auto& [k, v] : extra) {
        e[k] = v;
    }
    return e;
}

std::vector<std::string> CrawlFixture::argv(const std::string& crawl_id) const
{
    return {bin_path("crawl_worker").string(), "--crawl-id", crawl_id, "--database-url", db.url(), "--data-dir",
            data.string()};
}

std::unique_ptr<CrawlWorkerProcess> CrawlFixture::start(const std::string& crawl_id, const CrawlEnv& extra)
{
    auto log = root / ("crawl_worker." + std::to_string(++m_runs) + ".log");
    return std::make_unique<CrawlWorkerProcess>(argv(crawl_id), env(extra), log);
}

std::unique_ptr<CrawlWorkerProcess> CrawlFixture::run(const std::string& crawl_id, const CrawlEnv& extra,
                                                      std::chrono::milliseconds timeout)
{
    auto p = start(crawl_id, extra);
    bool done = p->wait_for(timeout);
    INFO(p->output());
    REQUIRE(done);
    return p;
}

} // namespace orch::test
