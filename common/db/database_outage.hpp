#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

// Riding out a PostgreSQL outage: a server restart, a failover, a network cut.
// Supervising processes does not need the database, so a worker that loses its
// connection need not tear down what runs and have it all run again: it waits
// for the server, its children running on, and retries the operation that met
// the loss on the same connection object, which libpqxx reconnects (prepared
// statements are prepared again on first use, LISTENs are re-issued). Only when
// the outage outlasts the grace (DB_OUTAGE_GRACE), or a stop signal arrives
// meanwhile, does the loss propagate: the process exits 4 and recovery cleans
// up after it, as before (crash-only).
namespace orch {

struct OutagePolicy {
    // How long after the loss reconnecting is tried. Zero: the loss propagates at once.
    std::chrono::milliseconds grace{0};
    // Readable when the process is asked to stop (StopSignals::fd); -1 for none.
    // Only looked at, never read: the owner's loop still sees the signal.
    int stop_fd = -1;
    // Called between reconnect attempts (a systemd watchdog keep-alive); must not
    // use the database. May be empty. Work that keeps its own time while the
    // thread waits registers an OutageTask instead.
    std::function<void()> while_waiting;
    // Called once the connection is back, before the operation is retried,
    // with how long it was gone (measured from the loss this wait began with)
    // and the error that began it: restores what the server kept per session
    // (the orchestrator's advisory lock) and may journal the outage. May use the
    // connection; what it throws propagates. May be empty.
    std::function<void(std::chrono::milliseconds down, const std::string& error)> on_reconnect;
    // True once the process is stopping (its loop took a stop request, so
    // stop_fd no longer shows it): a loss then gets one look, not the grace.
    // A stopping process has a deadline of its parent's, and its leftover rows
    // are closed by the next recovery; waiting out an outage would only get
    // it SIGKILLed in the middle of its own teardown. May be empty.
    std::function<bool()> stopping;
};

class StopSignals;
// The policy of a process whose stop requests arrive on `stop` (not owned;
// must outlive the policy): DB_OUTAGE_GRACE, stop_fd and stopping from `stop`.
// Throws ConfigError for a malformed DB_OUTAGE_GRACE.
OutagePolicy stoppable_outage_policy(const StopSignals& stop);

// The calling thread's policy; each executable sets it at start for its main
// thread, which owns the process's connection. Setting one also forgets an
// earlier give-up (see await_reconnect). Before that, and in every
// thread that never sets one, the grace is zero.
void set_outage_policy(OutagePolicy policy);
const OutagePolicy& outage_policy();

// While one exists on a thread, its losses are not waited for: await_reconnect
// rethrows at once. For work that must keep its own time whatever the database
// does, such as a teardown's deadlines (Supervisor::wait and teardown, which
// hold what they cannot write and write it later). Nests.
class OutageWaitsDeferred {
public:
    OutageWaitsDeferred();
    ~OutageWaitsDeferred();
    OutageWaitsDeferred(const OutageWaitsDeferred&) = delete;
    OutageWaitsDeferred& operator=(const OutageWaitsDeferred&) = delete;
};
bool outage_waits_deferred();

// Work that keeps its own time while the thread that registered it waits for
// the database (await_reconnect, connect_through_outage): a supervisor's hook
// timeouts (Supervisor::keep_deadlines). While one exists, the wait calls its
// task first thing, then again by the time the task returned (nullopt: at the
// next reconnect attempt, within a second), until the wait ends. The task must
// not use the database; what it throws is logged and dropped. Per thread;
// several may exist at once, and each runs. Registers its own address: neither
// copied nor moved.
class OutageTask {
public:
    using Clock = std::chrono::steady_clock;
    using Task = std::function<std::optional<Clock::time_point>()>;
    explicit OutageTask(Task task);
    ~OutageTask();
    OutageTask(const OutageTask&) = delete;
    OutageTask& operator=(const OutageTask&) = delete;

    // Runs the task (catching what it throws); when it wants to run again.
    std::optional<Clock::time_point> run() const;

private:
    Task m_task;
};

// When the calling thread's connection last came back from an outage; nullopt
// if it never did. A lease holder renews once it is back: until a lease's TTL
// has passed since then, an expired lease is no sign of a stalled holder.
std::optional<std::chrono::steady_clock::time_point> last_reconnect();

// The grace from DB_OUTAGE_GRACE (settings.hpp). Throws ConfigError.
std::chrono::milliseconds outage_grace_from_env();

// Blocks until `conn` answers a query again, after an operation on it threw
// `lost`; call it from the handler of `lost`. Tries at growing intervals (50 ms
// up to 1 s). Rethrows `lost` when the policy's grace has passed since the loss
// (zero grace: at once), its stop fd is readable, or under OutageWaitsDeferred;
// after one give-up, further losses get one look, not another grace. Logs the
// outage once, and its end. While it blocks, the caller's OutageTasks run (a
// supervisor keeps its hooks' timeouts); nothing else does: children run on,
// and their exits are reaped and written after it.
void await_reconnect(pqxx::connection& conn, const pqxx::failure& lost);

// Opens a connection with `connect`, retrying as await_reconnect does while
// it throws pqxx::broken_connection (the server refuses or is gone), under the
// same policy: rethrows once the grace has passed since the first refusal,
// when a stop is pending, or at once with zero grace. For a process whose
// parent was connected a moment ago, so that a refusal is an outage and not a
// wrong URL (a worker spawned by a supervisor).
std::unique_ptr<pqxx::connection>
connect_through_outage(const std::function<std::unique_ptr<pqxx::connection>()>& connect);

// Runs `op`; when it throws pqxx::broken_connection (or pqxx::in_doubt_error),
// waits for the connection (await_reconnect) and runs it again. `op` must be
// safe to run again: it opens its own transaction (no transaction may be open
// on `conn`), and what it writes is idempotent or was not committed. A
// statement the server broke off did not commit; only a server that died
// between a commit and its reply leaves the commit in doubt, and a write that
// cannot simply run twice must then find what its earlier try did: a process
// row insert keeps the row its id has (ON CONFLICT), a seal reads sealed_by, a
// claim uses ride_out_in_doubt (below).
template <typename Op>
auto ride_out(pqxx::connection& conn, Op&& op) -> decltype(op())
{
    for (;;) {
        try {
            return op();
        } catch (const pqxx::broken_connection& e) {
            await_reconnect(conn, e);
        } catch (const pqxx::in_doubt_error& e) {
            await_reconnect(conn, e);
        }
    }
}

// ride_out() of a write whose commit the client may never hear of: when the
// connection breaks after the server committed, the write runs again on rows
// that already hold it. Before each try after the first, `committed_before()`
// looks for what an earlier try committed (a std::optional of op's result);
// when it holds a value, that is the result and `op` does not run again. For
// writes that cannot simply run twice: a claim would take a second batch.
template <typename Op, typename Check>
auto ride_out_in_doubt(pqxx::connection& conn, Op&& op, Check&& committed_before) -> decltype(op())
{
    bool again = false;
    return ride_out(conn, [&]() -> decltype(op()) {
        if (again) {
            if (auto earlier = committed_before()) {
                return std::move(*earlier);
            }
        }
        again = true;
        return op();
    });
}

namespace detail {
// The type of the transaction a ride_out_transaction() body takes: its parameter's.
template <typename F>
struct TransactionOf : TransactionOf<decltype(&F::operator())> {};
template <typename C, typename R, typename Tx>
struct TransactionOf<R (C::*)(Tx&) const> {
    using type = Tx;
};
} // namespace detail

// ride_out() of one transaction: opens the transaction `body` takes (a
// pqxx::work, read_transaction or nontransaction, by the type of its parameter)
// on `conn`, runs `body(tx)` and commits when it returns; what `body` returns
// is returned. After a lost connection the whole runs again on a new
// transaction, so `body` must be safe to run twice, as for ride_out(). What
// `body` throws aborts the transaction and propagates.
template <typename Body>
auto ride_out_transaction(pqxx::connection& conn, Body&& body)
{
    using Tx = typename detail::TransactionOf<std::decay_t<Body>>::type;
    return ride_out(conn, [&] {
        Tx tx(conn);
        if constexpr (std::is_void_v<std::invoke_result_t<Body&, Tx&>>) {
            body(tx);
            tx.commit();
        } else {
            auto result = body(tx);
            tx.commit();
            return result;
        }
    });
}

} // namespace orch
