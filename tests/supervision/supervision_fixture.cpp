#include "tests/supervision/supervision_fixture.hpp"

#include "common/supervision/proc_sweep.hpp"
#include "common/supervision/process_identity.hpp"

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <system_error>
#include <thread>

#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

namespace orch::test {
namespace {

std::atomic<int> g_scope_counter{0};

} // namespace

bool run_events_until(Supervisor& sup, const std::function<bool()>& done, std::set<std::string>& finished)
{
    return eventually([&] {
        pollfd p{sup.epoll_fd(), POLLIN, 0};
        ::poll(&p, 1, 20);
        sup.process_events();
        for (const auto& outcome : sup.take_finished()) {
            finished.insert(outcome.row_id);
        }
        return done();
    });
}

bool until_finished(Supervisor& sup, const std::set<std::string>& row_ids)
{
    std::set<std::string> finished;
    return run_events_until(
        sup, [&] { return std::includes(finished.begin(), finished.end(), row_ids.begin(), row_ids.end()); },
        finished);
}

bool until_finished(Supervisor& sup, const std::string& row_id)
{
    return until_finished(sup, std::set<std::string>{row_id});
}

SupervisionFixture::SupervisionFixture()
    : conn(db.connect()), machine(detect_machine(std::nullopt)), dir("sup"),
      scope("test-" + std::to_string(::getpid()) + "-" + std::to_string(g_scope_counter++))
{
    register_machine(*conn, machine, std::nullopt);
}

SupervisorOptions SupervisionFixture::options(bool fallback) const
{
    SupervisorOptions o;
    o.machine_id = machine.id;
    o.self_process_type = "cli";
    o.containment.scope = scope;
    o.containment.force_fallback = fallback;
    o.teardown_grace = std::chrono::milliseconds(3000);
    return o;
}

LaunchRequest SupervisionFixture::request(std::vector<std::string> argv, std::string name) const
{
    LaunchRequest r;
    r.argv = std::move(argv);
    r.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}};
    r.pwd = dir;
    r.log_dir = dir / "logs";
    r.name = std::move(name);
    return r;
}

std::string SupervisionFixture::column(const std::string& row_id, const std::string& name) const
{
    pqxx::work tx(*conn);
    const auto r = tx.exec("SELECT " + name + "::text FROM process WHERE id = " + tx.quote(row_id));
    tx.commit();
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return condition();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

double thread_cpu_seconds()
{
    rusage r{};
    if (::getrusage(RUSAGE_THREAD, &r) != 0) {
        throw std::system_error(errno, std::generic_category(), "getrusage");
    }
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

bool pid_alive(pid_t pid)
{
    const auto stat = read_proc_stat(pid);
    return stat && stat->state != 'Z' && stat->state != 'X';
}

int zombie_children()
{
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const auto stat = read_proc_stat(std::stoi(name));
        if (stat && stat->state == 'Z' && stat->ppid == ::getpid()) {
            ++count;
        }
    }
    return count;
}

int open_fd_count()
{
    int count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        ++count;
    }
    return count;
}

std::vector<pid_t> pids_with_cookie(const std::string& cookie)
{
    return find_tree_members(SweepTarget{cookie, std::nullopt, 0});
}

} // namespace orch::test
