#include "tests/chaos/fault_injector.hpp"

#include "tests/chaos/db_query.hpp"
#include "tests/chaos/os_scan.hpp"
#include "tests/support/command_runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace orch::chaos {

namespace {

void sleep_s(double s)
{
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

} // namespace

FaultInjector::FaultInjector(const TrialSandbox& sandbox, PgControl& pg, std::mt19937_64& rng, int lease_ttl_s,
                             int pg_down_seconds)
    : m_sandbox(sandbox), m_pg(pg), m_rng(rng), m_lease_ttl_s(lease_ttl_s), m_pg_down_seconds(pg_down_seconds)
{
}

bool FaultInjector::pick(const std::string& where, int seconds, Target& out)
{
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    do {
        std::vector<Row> rows;
        try {
            rows = query(m_sandbox.db_url(), "SELECT id, pid, start_ticks FROM process WHERE status = 'running' "
                                             "AND pid IS NOT NULL AND start_ticks IS NOT NULL AND " +
                                                 where);
        } catch (const std::exception&) {
            rows.clear();
        }
        std::vector<Target> live;
        for (const auto& r : rows) {
            Target t{static_cast<pid_t>(std::stol(r[1])), std::stoull(r[2]), r[0]};
            if (same_process_alive(t.pid, t.start_ticks)) {
                live.push_back(t);
            }
        }
        if (!live.empty()) {
            out = live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(m_rng)];
            return true;
        }
        sleep_s(0.05);
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
}

bool FaultInjector::signal_target(const Target& t, int sig)
{
    // Same check the system makes: never signal a pid that may have been reused.
    return same_process_alive(t.pid, t.start_ticks) && ::kill(t.pid, sig) == 0;
}

FaultReport FaultInjector::kill_row(const std::string& what, const std::string& where)
{
    Target t;
    if (!pick(where, 20, t)) {
        return {false, "no running " + what + " to kill"};
    }
    bool ok = signal_target(t, SIGKILL);
    return {ok, "SIGKILL " + what + " pid " + std::to_string(t.pid)};
}

FaultReport FaultInjector::stop_worker()
{
    bool crawl = std::uniform_int_distribution<int>(0, 3)(m_rng) == 0;
    Target t;
    auto what = std::string(crawl ? "crawl" : "snapshot") + "_worker";
    if (!pick(std::string("process_type = 'worker' AND worker_type = '") + (crawl ? "crawl" : "snapshot") + "'", 20,
              t)) {
        return {false, "no running " + what + " to stop"};
    }
    if (!signal_target(t, SIGSTOP)) {
        return {false, what + " gone before SIGSTOP"};
    }
    // Held well past its lease: someone else may take the item meanwhile.
    sleep_s(2.0 * m_lease_ttl_s + 2);
    bool alive = same_process_alive(t.pid, t.start_ticks);
    if (alive) {
        ::kill(t.pid, SIGCONT);
    }
    return {true, "SIGSTOP " + what + " pid " + std::to_string(t.pid) + " for " +
                      std::to_string(2 * m_lease_ttl_s + 2) + " s, then " +
                      (alive ? "SIGCONT" : "it was already gone (killed as a stalled lease owner)")};
}

FaultReport FaultInjector::pause_resume()
{
    std::vector<Row> rows;
    try {
        rows = query(m_sandbox.db_url(), "SELECT id, lease_owner IS NOT NULL FROM crawl WHERE status <> 'sealed' "
                                         "LIMIT 1");
    } catch (const std::exception& e) {
        return {false, std::string("cannot find the crawl: ") + e.what()};
    }
    if (rows.empty()) {
        return {false, "no unsealed crawl to pause"};
    }
    const auto& crawl = rows[0][0];
    auto cli = [&](const std::string& verb) {
        return test::run_command({test::bin_path("orchestrator").string(), "--database-url", m_sandbox.db_url(),
                                  "--data-dir", m_sandbox.data().string(), verb, crawl});
    };
    auto paused = cli("pause");
    if (paused.exit_code != 0) {
        return {false, "pause failed: " + paused.err};
    }
    const double hold = std::uniform_real_distribution<double>(0.0, 3.0)(m_rng);
    sleep_s(hold);
    // The resume must land: a crawl left paused is a terminal-state violation at the end.
    auto resumed = cli("resume");
    char held[32];
    std::snprintf(held, sizeof held, "%.1f", hold);
    return {true, std::string("paused the crawl (") + (rows[0][1] == "t" ? "leased" : "not leased") + ") for " +
                      held + " s, then resumed" + (resumed.exit_code == 0 ? "" : " (resume FAILED: " + resumed.err + ")")};
}

FaultReport FaultInjector::fill_disk()
{
    if (!m_sandbox.tmpfs_mounted()) {
        return {false, "no tmpfs data directory"};
    }
    auto filler = m_sandbox.data() / ".chaos-filler";
    int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return {false, "cannot create the filler file"};
    }
    std::vector<char> block(64 * 1024, 'f');
    long written = 0;
    for (;;) {
        auto n = ::write(fd, block.data(), block.size());
        if (n <= 0) {
            break;
        }
        written += n;
    }
    ::close(fd);
    sleep_s(5);
    std::error_code ec;
    std::filesystem::remove(filler, ec);
    return {true, "data directory full (" + std::to_string(written / 1024) + " kB filler) for 5 s"};
}

FaultReport FaultInjector::inject(FaultKind kind, pid_t orchestrator_pid)
{
    switch (kind) {
    case FaultKind::kill_orchestrator: {
        bool ok = same_process_alive(orchestrator_pid, 0) && ::kill(orchestrator_pid, SIGKILL) == 0;
        return {ok, ok ? "SIGKILL orchestrator" : "orchestrator already gone"};
    }
    case FaultKind::kill_crawl_worker:
        return kill_row("crawl_worker", "process_type = 'worker' AND worker_type = 'crawl'");
    case FaultKind::kill_snapshot_worker:
        return kill_row("snapshot_worker", "process_type = 'worker' AND worker_type = 'snapshot'");
    case FaultKind::kill_hook:
        return kill_row("hook", "process_type = 'hook'");
    case FaultKind::stop_worker:
        return stop_worker();
    case FaultKind::pg_restart: {
        bool ok = m_pg.restart();
        return {ok, ok ? "pg_ctl restart" : "pg_ctl restart failed: " + m_pg.last_error()};
    }
    case FaultKind::pg_stop:
    case FaultKind::pg_past_grace: {
        if (!m_pg.stop()) {
            return {false, "pg_ctl stop failed: " + m_pg.last_error()};
        }
        sleep_s(m_pg_down_seconds);
        bool up = m_pg.start();
        return {true, "PostgreSQL down for " + std::to_string(m_pg_down_seconds) + " s" +
                          (kind == FaultKind::pg_past_grace
                               ? " (DB_OUTAGE_GRACE " + std::to_string(k_past_grace_s) + " s)"
                               : "") +
                          (up ? "" : " (start FAILED: " + m_pg.last_error() + ")")};
    }
    case FaultKind::disk_full:
        return fill_disk();
    case FaultKind::pause_resume:
        return pause_resume();
    default:
        return {true, "hostile hook " + to_string(kind) + " on every 5th URL"};
    }
}

} // namespace orch::chaos
