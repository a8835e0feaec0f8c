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

// Process state letter from /proc/<pid>/stat ('?' if unreadable).
char proc_state(pid_t pid)
{
    auto stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) {
        return '?';
    }
    return stat[close + 2];
}

std::string nul_to_space(std::string s)
{
    std::replace(s.begin(), s.end(), '\0', ' ');
    return s;
}

// A bash preamble for every test hook: the hook arguments as variables.
constexpr const char* k_preamble = R"(#!/usr/bin/env bash
set -u
url=""; snap=""; crawl=""
for arg in "$@"; do
  case "$arg" in
    --url=*) url="${arg#--url=}" ;;
    --snapshot-id=*) snap="${arg#--snapshot-id=}" ;;
    --crawl-id=*) crawl="${arg#--crawl-id=}" ;;
  esac
done
)";

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

bool process_alive(pid_t pid)
{
    char state = proc_state(pid);
    return state != '?' && state != 'Z' && state != 'X';
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

CrawlFixture::CrawlFixture() : root("orch-cw-"), plugins(root / "plugins"), data(root / "data")
{
    fs::create_directories(plugins);
    fs::create_directories(data);
}

pqxx::connection& CrawlFixture::conn()
{
    if (!m_conn) {
        m_conn = db.connect();
    }
    return *m_conn;
}

std::string CrawlFixture::add_crawl(const std::vector<std::string>& urls, const std::vector<std::string>& options)
{
    std::vector<std::string> argv = {bin_path("orchestrator").string(), "add", "--database-url", db.url(),
                                     "--data-dir", data.string()};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), urls.begin(), urls.end());
    auto r = run_command(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto id = r.out.substr(0, r.out.find('\n'));
    REQUIRE(id.size() == 36);
    return id;
}

std::vector<std::string> CrawlFixture::site_urls(int n)
{
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) {
        out.push_back("http://site.test/" + std::to_string(i));
    }
    return out;
}

fs::path CrawlFixture::write_hook(const std::string& plugin, const std::string& file, const std::string& body)
{
    auto dir = plugins / plugin;
    fs::create_directories(dir);
    auto path = dir / file;
    std::ofstream(path) << k_preamble << body << "\n";
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
    return path;
}

void CrawlFixture::write_config(const std::string& plugin, const std::string& json)
{
    fs::create_directories(plugins / plugin);
    std::ofstream(plugins / plugin / "config.json") << json;
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

std::string CrawlFixture::scalar(const std::string& sql)
{
    return test::scalar(conn(), sql);
}

std::vector<std::vector<std::string>> CrawlFixture::rows(const std::string& sql)
{
    return query(conn(), sql);
}

void CrawlFixture::exec(const std::string& sql)
{
    execute(conn(), sql);
}

std::string CrawlFixture::quote(const std::string& text)
{
    return conn().quote(text);
}

std::vector<std::string> CrawlFixture::leftover_processes()
{
    std::vector<std::string> cookies;
    for (const auto& row : rows("SELECT cookie FROM process WHERE cookie IS NOT NULL")) {
        cookies.push_back(std::string("ORCH_PROCESS_COOKIE=") + row[0]);
    }
    std::vector<std::string> out;
    std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
    while (auto* entry = ::readdir(proc.get())) {
        std::string name = entry->d_name;
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) {
            continue;
        }
        pid_t pid = std::stoi(name);
        if (pid == ::getpid() || !process_alive(pid)) {
            continue;
        }
        auto cmdline = nul_to_space(read_text("/proc/" + name + "/cmdline"));
        auto environ = read_text("/proc/" + name + "/environ");
        bool ours = cmdline.find(root.path().string()) != std::string::npos;
        std::istringstream vars(environ);
        for (std::string var; !ours && std::getline(vars, var, '\0');) {
            ours = std::find(cookies.begin(), cookies.end(), var) != cookies.end();
        }
        if (ours) {
            out.push_back(name + " " + cmdline);
        }
    }
    return out;
}

std::vector<std::string> CrawlFixture::wait_no_leftovers(std::chrono::milliseconds timeout)
{
    std::vector<std::string> left;
    poll_until(
        [&] {
            left = leftover_processes();
            return left.empty();
        },
        timeout);
    return left;
}

} // namespace orch::test
