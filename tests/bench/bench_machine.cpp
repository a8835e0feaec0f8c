#include "tests/bench/bench_machine.hpp"

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace orch::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int k_clients = 8;
constexpr int k_rows = 100'000;

// Client c runs the unit of work `work(c)` gives it, one call per unit, on a
// thread of its own, until `seconds` have passed; the units per second over the
// wall time all of them took. An exception stops its thread and is rethrown here.
template <typename Work>
double rate(double seconds, Work work)
{
    std::atomic<long> done{0};
    std::mutex failed_lock;
    std::exception_ptr failed;
    const auto t0 = Clock::now();
    const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    std::vector<std::thread> threads;
    for (int c = 0; c < k_clients; ++c) {
        threads.emplace_back([&, c] {
            try {
                auto unit = work(c);
                long n = 0;
                while (Clock::now() < until) {
                    unit();
                    ++n;
                }
                done += n;
            } catch (...) {
                const std::lock_guard<std::mutex> hold(failed_lock);
                failed = std::current_exception();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    if (failed) {
        std::rethrow_exception(failed);
    }
    return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - t0).count();
}

} // namespace

double connections_per_second(const std::string& conninfo, double seconds)
{
    return rate(seconds, [&](int) {
        return [&] {
            pqxx::connection conn(conninfo);
            pqxx::nontransaction(conn).exec1("SELECT 1");
        };
    });
}

double by_id_updates_per_second(const std::string& conninfo, double seconds)
{
    {
        pqxx::connection admin(conninfo);
        pqxx::nontransaction tx(admin);
        tx.exec0("DROP TABLE IF EXISTS bench_by_id");
        tx.exec0("CREATE TABLE bench_by_id (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)");
        tx.exec_params0("INSERT INTO bench_by_id (id) SELECT generate_series(1, $1)", k_rows);
        tx.exec0("VACUUM ANALYZE bench_by_id");
        tx.exec0("CHECKPOINT");
    }
    std::vector<std::unique_ptr<pqxx::connection>> conns;
    for (int c = 0; c < k_clients; ++c) {
        conns.push_back(std::make_unique<pqxx::connection>(conninfo));
        pqxx::nontransaction(*conns.back()).exec0("SET synchronous_commit = off");
        conns.back()->prepare("by_id", "UPDATE bench_by_id SET n = n + 1 WHERE id = $1 RETURNING n");
    }
    const double per_second = rate(seconds, [&](int c) {
        return [&conn = *conns[static_cast<std::size_t>(c)], pick = std::uniform_int_distribution<int>(1, k_rows),
                random = std::minstd_rand(static_cast<unsigned>(c) + 1)]() mutable {
            pqxx::nontransaction(conn).exec_prepared1("by_id", pick(random));
        };
    });
    conns.clear();
    pqxx::connection admin(conninfo);
    pqxx::nontransaction(admin).exec0("DROP TABLE bench_by_id");
    return per_second;
}

} // namespace orch::bench
