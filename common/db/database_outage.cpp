#include "common/db/database_outage.hpp"

#include "common/base/log.hpp"
#include "common/config/settings.hpp"
#include "common/base/stop_signals.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

// Per thread: the policy belongs to the thread whose connection it governs (a
// process's other threads, such as the metrics server, keep their own
// connection and the default, zero grace).
OutagePolicy& policy_slot()
{
    thread_local OutagePolicy policy;
    return policy;
}

bool stop_pending(int fd)
{
    if (fd < 0) {
        return false;
    }
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

// Sleeps `d`, or less when the stop fd becomes readable.
void pause(int stop_fd, std::chrono::milliseconds d)
{
    if (stop_fd < 0) {
        std::this_thread::sleep_for(d);
        return;
    }
    pollfd p{stop_fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(d.count()));
    if (rc < 0 && errno != EINTR) {
        std::this_thread::sleep_for(d);
    }
}

// Set when an outage outlasted the grace, or a stop ended the wait; cleared
// when the connection is back.
thread_local bool g_gave_up = false;
thread_local std::optional<Clock::time_point> g_last_reconnect;
thread_local int g_deferred = 0;
thread_local std::vector<const OutageTask*> g_tasks;

// Runs every registered task; the soonest time one wants to run again.
std::optional<Clock::time_point> run_tasks()
{
    std::optional<Clock::time_point> next;
    for (const auto* task : g_tasks) { // a task never registers or drops one
        if (const auto due = task->run()) {
            next = next ? std::min(*next, *due) : *due;
        }
    }
    return next;
}

// The connection is back: noted, and what the server forgot restored.
void reconnected(const OutagePolicy& policy, Clock::time_point since, const std::string& error)
{
    g_gave_up = false;
    g_last_reconnect = Clock::now();
    if (policy.on_reconnect) {
        policy.on_reconnect(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since), error);
    }
}

std::string trimmed(std::string text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    return text;
}

// Whether `conn` answers; libpqxx reconnects a broken connection when a
// transaction starts on it.
bool probe(pqxx::connection& conn)
{
    try {
        pqxx::nontransaction(conn).exec("SELECT 1");
        return true;
    } catch (const pqxx::broken_connection&) {
        return false;
    } catch (const pqxx::sql_error&) {
        return false; // up, but not accepting queries yet (starting, in recovery)
    }
}

// How a wait for the server ended.
enum class WaitEnd { answered, grace_over, stop_requested };

// Calls `attempt` at 50 ms doubling to 1 s (the policy's while_waiting before
// each) until it returns true, the grace counted from `since` has passed, or a
// stop is pending; the OutageTasks run first, and whenever they are due in
// between. `attempts` counts the calls.
WaitEnd wait_for_server(const OutagePolicy& policy, Clock::time_point since, int& attempts,
                        const std::function<bool()>& attempt)
{
    const auto give_up = since + policy.grace;
    auto interval = std::chrono::milliseconds(50);
    auto next_attempt = Clock::now() + interval;
    for (;;) {
        auto wake = std::min(next_attempt, give_up);
        if (const auto due = run_tasks()) {
            wake = std::min(wake, *due);
        }
        const auto now = Clock::now();
        if (now >= give_up) {
            return WaitEnd::grace_over;
        }
        // Rounded up, and 1 ms at least: woken a little late rather than
        // spinning until a due time.
        pause(policy.stop_fd, std::max(std::chrono::ceil<std::chrono::milliseconds>(wake - now),
                                       std::chrono::milliseconds(1)));
        if (stop_pending(policy.stop_fd)) {
            return WaitEnd::stop_requested;
        }
        const auto woke = Clock::now();
        if (woke < next_attempt && woke < give_up) {
            continue; // woken for a task; at the end of the grace, one last attempt
        }
        if (policy.while_waiting) {
            policy.while_waiting();
        }
        interval = std::min(interval * 2, std::chrono::milliseconds(1000));
        ++attempts;
        if (attempt()) {
            return WaitEnd::answered;
        }
        next_attempt = Clock::now() + interval;
    }
}

std::string ms(Clock::duration d)
{
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

} // namespace

void set_outage_policy(OutagePolicy policy)
{
    policy_slot() = std::move(policy);
    g_gave_up = false;
}

const OutagePolicy& outage_policy()
{
    return policy_slot();
}

OutageTask::OutageTask(Task task) : m_task(std::move(task))
{
    g_tasks.push_back(this);
}

OutageTask::~OutageTask()
{
    g_tasks.erase(std::remove(g_tasks.begin(), g_tasks.end(), this), g_tasks.end());
}

std::optional<Clock::time_point> OutageTask::run() const
{
    try {
        return m_task();
    } catch (const std::exception& e) {
        log::warn("a task kept through the database outage failed", {{"error", e.what()}});
        return std::nullopt;
    }
}

OutageWaitsDeferred::OutageWaitsDeferred()
{
    ++g_deferred;
}

OutageWaitsDeferred::~OutageWaitsDeferred()
{
    --g_deferred;
}

bool outage_waits_deferred()
{
    return g_deferred > 0;
}

std::optional<Clock::time_point> last_reconnect()
{
    return g_last_reconnect;
}

OutagePolicy stoppable_outage_policy(const StopSignals& stop)
{
    return {outage_grace_from_env(), stop.fd(), {}, {}, [&stop] { return stop.count() > 0; }};
}

std::chrono::milliseconds outage_grace_from_env()
{
    return std::chrono::seconds(read_setting(setting::db_outage_grace));
}

std::unique_ptr<pqxx::connection>
connect_through_outage(const std::function<std::unique_ptr<pqxx::connection>()>& connect)
{
    const auto& policy = outage_policy();
    std::exception_ptr last;
    try {
        return connect();
    } catch (const pqxx::broken_connection& e) {
        if (policy.grace.count() <= 0 || stop_pending(policy.stop_fd)) {
            throw;
        }
        last = std::current_exception();
        log::warn("cannot reach the database; waiting for it",
                  {{"error", trimmed(e.what())}, {"grace_ms", std::to_string(policy.grace.count())}});
    }
    const auto since = Clock::now();
    int attempts = 1;
    std::unique_ptr<pqxx::connection> conn;
    const auto end = wait_for_server(policy, since, attempts, [&] {
        try {
            conn = connect();
            return true;
        } catch (const pqxx::broken_connection&) {
            last = std::current_exception();
            return false;
        }
    });
    if (end != WaitEnd::answered) {
        std::rethrow_exception(last);
    }
    log::info("database reachable", {{"waited_ms", ms(Clock::now() - since)}, {"attempts", std::to_string(attempts)}});
    return conn;
}

void await_reconnect(pqxx::connection& conn, const pqxx::failure& lost)
{
    // Called from the handler of `lost`: rethrown as what it is, not as a failure.
    const auto rethrow = [&lost, current = std::current_exception()] {
        if (current) {
            std::rethrow_exception(current);
        }
        throw pqxx::broken_connection(lost.what());
    };
    const auto& policy = outage_policy();
    if (policy.grace.count() <= 0 || g_deferred > 0) {
        rethrow();
    }
    if (stop_pending(policy.stop_fd)) {
        // On its way out: what it still writes while stopping (a supervisor's
        // teardown takes the stop) gets one look, not a grace.
        g_gave_up = true;
        rethrow();
    }
    if (policy.stopping && policy.stopping()) {
        g_gave_up = true;
    }
    if (g_gave_up) {
        // The process is on its way out (a caller swallowed the first give-up):
        // one look, not another grace.
        if (!probe(conn)) {
            rethrow();
        }
        log::info("database connection back");
        reconnected(policy, Clock::now(), trimmed(lost.what()));
        return;
    }
    const auto since = Clock::now();
    const std::string reason = trimmed(lost.what());
    log::warn("lost the database connection; waiting for it, processes keep running",
              {{"error", reason}, {"grace_ms", std::to_string(policy.grace.count())}});
    int attempts = 0;
    switch (wait_for_server(policy, since, attempts, [&] { return probe(conn); })) {
    case WaitEnd::answered:
        log::info("database connection back", {{"down_ms", ms(Clock::now() - since)},
                                                {"attempts", std::to_string(attempts)}});
        reconnected(policy, since, reason);
        return;
    case WaitEnd::grace_over:
        log::error("the database stayed unreachable past the outage grace",
                   {{"waited_ms", ms(Clock::now() - since)}, {"attempts", std::to_string(attempts)}});
        g_gave_up = true;
        break;
    case WaitEnd::stop_requested:
        log::warn("stop requested while the database is unreachable", {{"waited_ms", ms(Clock::now() - since)}});
        g_gave_up = true; // as above
        break;
    }
    rethrow();
}

} // namespace orch
