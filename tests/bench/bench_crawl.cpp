// Rows 2, 4, 6 and 7 of scripts/bench, through the real executables:
//  2. end-to-end throughput: a crawl of N URLs, 3 no-op hooks per snapshot, 8
//     snapshot workers (orchestrator -> crawl_worker -> snapshot_worker -> hooks),
//     against a minimal C++ loop doing the same processes and connections and
//     keeping the least a record needs (a row per hook and its exit, a durable
//     seal per snapshot: bench_raw_worker --record), its snapshots queued by a
//     process as ours are (bench_raw_worker --add). Both sides are timed by the
//     wall clock from the process that queues the work to the last process
//     gone. As context, the same loop with no records (the bare loop);
//  6. peak RSS of the three programs during row 2; CPU of an idle daemon;
//  7. row 2 again against a database already holding many sealed snapshots and
//     exited process rows;
//  4. wake-up latency with the daemon idle: add -> crawl_worker running, and
//     last snapshot sealed -> crawl sealed (database timestamps).
// Row 2 runs in rounds, each our crawl and the recording raw loop next to each
// other (the bare loop beside them), and reports the medians and the median of
// the rounds' ratios: this VM's speed drifts by 10-15% from minute to minute,
// and a ratio of two runs minutes apart would carry the drift. Row 7 runs as
// many rounds the same way, and compares its median ratio with row 2's.
// Needs TEST_DATABASE_URL.
// Usage: bench_crawl <urls> <scale rows> <latency samples> <idle seconds> [<rounds of rows 2 and 7>]
// 0 URLs skips rows 2, 6 (peak RSS) and 7; 0 scale rows skips row 7; 0 samples
// skips row 4 and the idle CPU.
// Row 4 needs track_commit_timestamp = on: scripts/bench runs it apart, after
// restarting its cluster with it (the other rows run on stock settings).
#include "common/supervision/resource_usage.hpp"
#include "tests/bench/bench_proc.hpp"
#include "tests/bench/bench_report.hpp"
#include "tests/bench/tmpfs_dir.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <utility>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace orch;
using namespace orch::test;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr int k_snapshot_workers = 8;
constexpr const char* k_hooks[] = {"on_Snapshot__10_a", "on_Snapshot__10_b", "on_Snapshot__10_c"};

struct Bench {
    ScratchDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
    // Removed when the bench ends (the data dir is big). Each step waits for the
    // processes it started (crawl() and latency_and_idle() reap their orchestrator,
    // which stops its workers; raw_loop() waits for its own), so none is left
    // using these when Bench goes.
    ScratchDir data{"bench-data"};
    ScratchDir plugins{"bench-plugins"};
    fs::path noop = bin_path("bench_noop");
    // The server of our connections (PostgreSQL's postmaster), whose CPU each run
    // reads: our backend's parent. Both must be postgres processes of this machine
    // (a server elsewhere would hand us the pid of some unrelated local process).
    pid_t postmaster = [this] {
        const auto backend = pqxx::nontransaction(*conn).exec1("SELECT pg_backend_pid()")[0].as<long>();
        auto field = [](long pid, const std::string& file, const std::string& key) {
            std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
            for (std::string line; std::getline(in, line);) {
                if (key.empty() || line.rfind(key, 0) == 0) {
                    return line.substr(key.size());
                }
            }
            return std::string();
        };
        const auto server = std::atol(field(backend, "status", "PPid:").c_str());
        if (field(backend, "comm", "") != "postgres" || server <= 1 || field(server, "comm", "") != "postgres") {
            throw std::runtime_error("the PostgreSQL server must run on this machine: its CPU is read from /proc "
                                     "(scripts/bench starts one)");
        }
        return static_cast<pid_t>(server);
    }();

    Bench()
    {
        fs::create_directories(plugins / "noop");
        for (const auto* hook : k_hooks) {
            fs::copy_file(noop, plugins / "noop" / hook);
            fs::permissions(plugins / "noop" / hook, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                            fs::perm_options::add);
        }
    }

    // `data_dir`: the data directory, when not `data`.
    std::vector<std::string> orchestrator(const std::vector<std::string>& more, const fs::path& data_dir = {}) const
    {
        std::vector<std::string> argv = {bin_path("orchestrator").string(), "--database-url", db.url(), "--data-dir",
                                         (data_dir.empty() ? data.path() : data_dir).string(), "--machine-id", "bench"};
        argv.insert(argv.end(), more.begin(), more.end());
        return argv;
    }

    EnvChanges env() const
    {
        return {{"ORCH_BUILTIN_PLUGINS_DIR", ""},
                {"PLUGINS_DIR", plugins.path().string()},
                {"DATABASE_URL", std::nullopt},
                {"MAX_CRAWL_WORKERS", std::nullopt}, {"MAX_SNAPSHOT_WORKERS", std::nullopt},
                {"HOOK_PARALLELISM", std::nullopt}, {"LEASE_TTL", std::nullopt}};
    }

    std::string add(const std::vector<std::string>& urls)
    {
        const auto file = data / "urls.txt";
        std::ofstream(file) << [&] {
            std::string all;
            for (const auto& u : urls) {
                all += u + "\n";
            }
            return all;
        }();
        auto r = run_command(orchestrator({"add", "--urls-file", file.string()}), {{"DATABASE_URL", ""}});
        if (r.exit_code != 0) {
            throw std::runtime_error("orchestrator add failed: " + r.err);
        }
        return r.out.substr(0, r.out.find_first_of(" \n"));
    }

    double scalar(const std::string& sql)
    {
        pqxx::work tx(*conn);
        auto r = tx.exec1(sql);
        tx.commit();
        return r[0].is_null() ? -1 : r[0].as<double>();
    }
};

std::vector<std::string> urls(int n, const std::string& tag)
{
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        out.push_back("https://example.com/" + tag + "/" + std::to_string(i));
    }
    return out;
}

// Where a run's machine CPU went, in ms per snapshot: the hooks, the processes
// running them (snapshot workers; the raw loop's workers), those managing them
// (orchestrator and crawl worker; none in the raw loop), PostgreSQL (its
// postmaster's tree) and the rest of the machine (kernel threads, interrupts,
// the bench itself).
struct CpuSplit {
    double hooks = 0, workers = 0, managers = 0, postgres = 0, rest = 0;
};

// One measured run. Every figure covers the run's window: wall clock from the
// process that queues the work (`orchestrator add`; the raw loop's
// `bench_raw_worker --add`) to the last process gone (ours: the orchestrator
// reaped, having reaped its workers; raw: the last raw worker reaped). The bare
// raw loop queues nothing: its window opens at its first spawn.
struct CrawlRun {
    double per_s = 0;  // snapshots / wall_s
    double wall_s = 0; // the window
    double spawned_s = 0; // the window less the add: first spawn of the run -> last process gone
    double pipeline_s = 0; // ours only: the database's first snapshot created_at -> last sealed_at
    double cpu_ms = 0; // machine CPU per snapshot over the window
    int workers = 0; // snapshot_worker processes the crawl used
    CpuSplit split;
    double xacts = 0; // database transactions per snapshot (each a round trip at least)
    double wal_kb = 0; // WAL written per snapshot, in kB (the cluster's: an autovacuum meanwhile counts too)
    double cores = 0;  // the machine's cores busy on average during the run
};

// The cluster's WAL insert position, in bytes: exact at once (unlike pg_stat_wal,
// which a backend flushes later). Every run starts right after settle()'s
// checkpoint, so each side pays the full-page images of the pages it touches first.
double wal_position(Bench& b)
{
    return b.scalar("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn");
}

// Transactions committed or rolled back in the bench's database so far, as the
// server's statistics have them (a backend reports its own when it exits).
double transactions(Bench& b)
{
    return b.scalar("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()");
}

// Lets the machine go quiet before a measurement: flushes what earlier steps
// (bench_claims' million rows, the history fill) left dirty and waits for their
// autovacuum workers, which otherwise take CPU from whichever figure runs next.
// Then writes back every file earlier runs left dirty (the workers' logs and
// outputs, kept to the end of the bench): the kernel starts that 30 s after they
// were written (vm.dirty_expire_centisecs), in the middle of a later run, where
// vmstat showed 15-55% iowait and the run left a quarter of the CPU idle.
// Every measured run, ours and the baselines, gets the same.
void settle(Bench& b)
{
    pqxx::nontransaction(*b.conn).exec0("CHECKPOINT");
    ::sync();
    eventually([&] { return b.scalar("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'") == 0; },
               std::chrono::seconds(60));
}

// Clock ticks in ms per item.
double ticks_ms_each(long ticks, int items)
{
    return static_cast<double>(ticks) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK)) / items;
}

// Machine CPU (all processes: ours, PostgreSQL, the hooks) since `busy0`, in ms per item.
double cpu_ms_each(long busy0, int items)
{
    return static_cast<double>(bench::machine_busy_ticks() - busy0) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK)) /
           items;
}

// One crawl of n URLs through the real executables (one-shot orchestrator), in
// the data directory `data_dir` (default: the bench's own).
CrawlRun crawl(Bench& b, int n, const std::string& tag, const fs::path& data_dir = {})
{
    settle(b);
    const double xacts0 = transactions(b);
    const double wal0 = wal_position(b);
    const auto t0 = Clock::now();
    const long busy0 = bench::machine_busy_ticks();
    const long pg0 = bench::server_tree_ticks(b.postmaster);
    const auto id = b.add(urls(n, tag));
    const auto spawned = Clock::now();
    SpawnedProcess orch(b.orchestrator({"--idle-window", "0", "--max-crawl-workers", "1", "--max-snapshot-workers",
                                        std::to_string(k_snapshot_workers)},
                                       data_dir),
                        b.env());
    if (!orch.wait_for(std::chrono::minutes(20)) || orch.exit_code() != 0) {
        throw std::runtime_error("orchestrator run failed: " + orch.err().substr(0, 4000));
    }
    CrawlRun out;
    const auto t1 = Clock::now();
    out.wall_s = std::chrono::duration<double>(t1 - t0).count();
    out.spawned_s = std::chrono::duration<double>(t1 - spawned).count();
    out.per_s = n / out.wall_s;
    out.cpu_ms = cpu_ms_each(busy0, n);
    out.cores = out.cpu_ms * n / 1000.0 / out.wall_s;
    const double pg_ms = ticks_ms_each(bench::server_tree_ticks(b.postmaster) - pg0, n);
    out.xacts = (transactions(b) - xacts0) / n;
    out.wal_kb = (wal_position(b) - wal0) / 1024.0 / n;
    const auto q = "'" + id + "'";
    const double sealed = b.scalar("SELECT count(*) FROM snapshot WHERE status = 'sealed' AND crawl_id = " + q);
    if (sealed != n) {
        throw std::runtime_error("crawl sealed " + std::to_string(sealed) + " of " + std::to_string(n) + " snapshots");
    }
    // The window ends when the last process is gone: the orchestrator's exit says
    // so only if none of the crawl's processes is still recorded as running.
    const double running = b.scalar("SELECT count(*) FROM process WHERE status = 'running' AND crawl_id = " + q);
    if (running != 0) {
        throw std::runtime_error("the orchestrator exited with " + std::to_string(running) +
                                 " of the crawl's processes still running");
    }
    // For the commentary only: the snapshot pipeline as the database's timestamps
    // have it, from the seeds' creation to the last seal (no start-up, no teardown).
    out.pipeline_s = b.scalar("SELECT extract(epoch FROM max(sealed_at) - min(created_at)) FROM snapshot WHERE crawl_id = " + q);
    out.workers = static_cast<int>(b.scalar("SELECT count(*) FROM process WHERE worker_type = 'snapshot' AND crawl_id = " + q));
    // The process rows' CPU as their reapers recorded it: each includes what it
    // reaped (hooks in their snapshot worker, everything in the orchestrator).
    auto cpu_ms = [&](const std::string& where) {
        const double s = b.scalar("SELECT sum(cpu_user_s + cpu_system_s) FROM process WHERE " + where);
        if (s < 0) {
            throw std::runtime_error("no CPU recorded for " + where);
        }
        return s * 1000.0 / n;
    };
    const double hooks = cpu_ms("process_type = 'hook' AND crawl_id = " + q);
    const double workers = cpu_ms("worker_type = 'snapshot' AND crawl_id = " + q);
    const double all = cpu_ms("process_type = 'orchestrator' AND id = (SELECT parent_id FROM process "
                              "WHERE worker_type = 'crawl' AND crawl_id = " + q + " LIMIT 1)");
    out.split = {hooks, workers - hooks, all - workers, pg_ms, out.cpu_ms - all - pg_ms};
    std::printf("crawl %s: %d snapshots in %.2f s, add -> orchestrator gone (%.1f/s; without the add %.2f s; "
                "database first created_at -> last sealed_at %.2f s; machine CPU %.2f ms per snapshot: "
                "hooks %.2f, snapshot workers %.2f, orchestrator + crawl worker %.2f, PostgreSQL %.2f, the rest %.2f; "
                "WAL %.1f kB per snapshot)\n",
                tag.c_str(), n, out.wall_s, out.per_s, out.spawned_s, out.pipeline_s, out.cpu_ms, out.split.hooks,
                out.split.workers, out.split.managers, out.split.postgres, out.split.rest, out.wal_kb);
    return out;
}

// The raw loop: 8 processes at a time, each opening one connection and spawning
// the plugin's 3 no-op hook files (as ours) for each of its share of the n
// snapshots: the process structure of ours (8 snapshot workers, each taking
// snapshot after snapshot) with nothing else. With `record` (row 2's paired
// baseline) it keeps the least a record needs, one plain statement each (a row
// per hook before its spawn, its exit after, a durable seal per snapshot), and
// its window opens, as ours does, with a process that queues the n snapshots
// (bench_raw_worker --add). Without it (the bare loop, context) there is
// nothing to queue: its window opens at its first spawn.
CrawlRun raw_loop(Bench& b, int n, bool record)
{
    const int workers = k_snapshot_workers;
    if (record) {
        // Untimed, as our schema's migrations are: the tables of the minimal records.
        pqxx::work tx(*b.conn);
        tx.exec0("DROP TABLE IF EXISTS raw_process, raw_snapshot");
        tx.exec0("CREATE TABLE raw_snapshot (id int PRIMARY KEY, sealed_at timestamptz)");
        tx.exec0("CREATE TABLE raw_process (id bigserial PRIMARY KEY, snapshot_id int NOT NULL, hook text NOT NULL, "
                 " pid int, exit_code int, started_at timestamptz NOT NULL DEFAULT now(), ended_at timestamptz)");
        tx.commit();
    }
    settle(b);
    const double xacts0 = transactions(b);
    const double wal0 = wal_position(b);
    const auto worker = bin_path("bench_raw_worker").string();
    std::vector<std::string> hooks;
    for (const auto* name : k_hooks) {
        hooks.push_back((b.plugins / "noop" / name).string());
    }
    const auto url = "DATABASE_URL=" + b.db.url();
    // Each raw worker appends the CPU of the hooks it reaped there.
    const auto usage_file = b.data / "raw_usage.txt";
    std::ofstream(usage_file, std::ios::trunc).close();
    const auto usage_env = "BENCH_USAGE_FILE=" + usage_file.string();
    char* envp[] = {const_cast<char*>(url.c_str()), const_cast<char*>(usage_env.c_str()), nullptr};
    double workers_s = 0; // the raw workers with their hooks (wait4)
    std::set<pid_t> running;
    const auto t0 = Clock::now();
    const long busy0 = bench::machine_busy_ticks();
    const long pg0 = bench::server_tree_ticks(b.postmaster);
    if (record) {
        const auto count = std::to_string(n);
        char* argv[] = {const_cast<char*>(worker.c_str()), const_cast<char*>("--add"), const_cast<char*>(count.c_str()),
                        nullptr};
        pid_t pid = 0;
        int status = 0;
        if (posix_spawn(&pid, worker.c_str(), nullptr, nullptr, argv, envp) != 0 || ::waitpid(pid, &status, 0) != pid ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            throw std::runtime_error("bench_raw_worker --add failed");
        }
    }
    const auto spawned = Clock::now();
    int started = 0;
    int failed = 0;
    int first = 0; // the first snapshot number of the next worker's share
    while (started < workers || !running.empty()) {
        while (started < workers && running.size() < k_snapshot_workers) {
            // An even share of the n snapshots: the first n % workers get one more.
            const int count = n / workers + (started < n % workers ? 1 : 0);
            const auto share = std::to_string(count);
            const auto first_text = std::to_string(first);
            std::vector<char*> argv = {const_cast<char*>(worker.c_str())};
            if (record) {
                argv.push_back(const_cast<char*>("--record"));
                argv.push_back(const_cast<char*>(first_text.c_str()));
            }
            argv.push_back(const_cast<char*>(share.c_str()));
            for (const auto& hook : hooks) {
                argv.push_back(const_cast<char*>(hook.c_str()));
            }
            argv.push_back(nullptr);
            pid_t pid = 0;
            if (posix_spawn(&pid, worker.c_str(), nullptr, nullptr, argv.data(), envp) != 0) {
                throw std::runtime_error("cannot spawn bench_raw_worker");
            }
            running.insert(pid);
            ++started;
            first += count;
        }
        int status = 0;
        struct rusage ru{};
        const pid_t pid = ::wait4(-1, &status, 0, &ru);
        if (running.erase(pid) != 0) {
            const auto usage = ResourceUsage::from_rusage(ru);
            workers_s += usage.user_s + usage.system_s;
            if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                ++failed;
            }
        }
    }
    const auto t1 = Clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    const double pg_ms = ticks_ms_each(bench::server_tree_ticks(b.postmaster) - pg0, n);
    const double xacts = (transactions(b) - xacts0) / n;
    const double wal_kb = (wal_position(b) - wal0) / 1024.0 / n;
    if (failed > 0) {
        throw std::runtime_error(std::to_string(failed) + " raw workers failed");
    }
    if (record) {
        // The records are all there, or the figure does not count.
        const double sealed = b.scalar("SELECT count(*) FROM raw_snapshot WHERE sealed_at IS NOT NULL");
        const double exited = b.scalar("SELECT count(*) FROM raw_process WHERE exit_code = 0 AND ended_at IS NOT NULL");
        if (sealed != n || exited != 3.0 * n) {
            throw std::runtime_error("raw records incomplete: " + std::to_string(sealed) + " seals, " +
                                     std::to_string(exited) + " exits");
        }
    }
    CrawlRun out;
    out.wall_s = s;
    out.spawned_s = std::chrono::duration<double>(t1 - spawned).count();
    out.per_s = n / s;
    out.cpu_ms = cpu_ms_each(busy0, n);
    out.cores = out.cpu_ms * n / 1000.0 / out.wall_s;
    out.workers = workers;
    out.xacts = xacts;
    out.wal_kb = wal_kb;
    double hooks_s = 0;
    std::ifstream usage(usage_file);
    for (double s = 0; usage >> s;) {
        hooks_s += s;
    }
    out.split = {hooks_s * 1000.0 / n, (workers_s - hooks_s) * 1000.0 / n, 0, pg_ms,
                 out.cpu_ms - workers_s * 1000.0 / n - pg_ms};
    std::printf("raw loop%s: %d workers x (1 connection) + %d snapshots x 3 hooks in %.2f s, %s -> last worker "
                "gone (%.1f/s; machine CPU %.2f ms per snapshot: hooks %.2f, workers %.2f, PostgreSQL %.2f, "
                "the rest %.2f; WAL %.1f kB per snapshot)\n",
                record ? " recording (a row per hook and its exit, a durable seal per snapshot)" : " bare", workers, n,
                s, record ? "add" : "first spawn", out.per_s, out.cpu_ms, out.split.hooks, out.split.workers,
                out.split.postgres, out.split.rest, out.wal_kb);
    return out;
}

// Sealed snapshots and exited process rows, as a long-lived installation has them.
void fill_history(Bench& b, long rows)
{
    const auto t0 = Clock::now();
    pqxx::work tx(*b.conn);
    tx.exec0("INSERT INTO machine (id, hostname, boot_id, cpu_count) VALUES ('bench-old', 'old', 'old', 1) "
             "ON CONFLICT DO NOTHING");
    const auto crawl = tx.exec1("INSERT INTO crawl (urls, status, outcome, retry_at, started_at, sealed_at) "
                                "VALUES ('{https://example.com/}', 'sealed', 'succeeded', NULL, now(), now()) RETURNING id")[0]
                           .as<std::string>();
    tx.exec_params0("INSERT INTO snapshot (crawl_id, url, status, outcome, retry_at, started_at, sealed_at) "
                    "SELECT $1, 'https://example.com/old/' || g, 'sealed', 'succeeded', NULL, now(), now() "
                    "FROM generate_series(1, $2) g",
                    crawl, rows);
    tx.exec_params0("INSERT INTO process (machine_id, process_type, status, pid, exit_code, end_reason, crawl_id, "
                    " started_at, ended_at, cmd) "
                    "SELECT 'bench-old', 'hook', 'exited', 1 + g % 30000, 0, 'exited', $1, now(), now(), "
                    " '[\"/bin/true\"]' FROM generate_series(1, $2) g",
                    crawl, rows);
    tx.commit();
    pqxx::nontransaction(*b.conn).exec0("VACUUM ANALYZE");
    std::printf("history: %ld sealed snapshots and %ld exited process rows in %.1f s\n", rows, rows,
                std::chrono::duration<double>(Clock::now() - t0).count());
}

bool wait_sealed(Bench& b, const std::string& crawl_id)
{
    return eventually(
        [&] { return b.scalar("SELECT count(*) FROM crawl WHERE status = 'sealed' AND id = '" + crawl_id + "'") == 1; },
        std::chrono::seconds(60));
}

void latency_and_idle(Bench& b, int samples, int idle_s)
{
    if (pqxx::nontransaction(*b.conn).exec1("SHOW track_commit_timestamp")[0].as<std::string>() != "on") {
        throw std::runtime_error("row 4 reads commit timestamps: run it on a cluster with track_commit_timestamp = on "
                                 "(scripts/bench restarts its cluster so)");
    }
    // Like every measured run: not on top of the checkpoint and the autovacuum that
    // row 7's million-row fill and crawl may leave running.
    settle(b);
    SpawnedProcess daemon(b.orchestrator({"--daemon", "--max-snapshot-workers", std::to_string(k_snapshot_workers)}),
                          b.env());
    if (!eventually([&] { return b.scalar("SELECT count(*) FROM process WHERE process_type = 'orchestrator' "
                                          "AND status = 'running' AND pid = " + std::to_string(daemon.pid())) == 1; },
                    std::chrono::seconds(30))) {
        throw std::runtime_error("the daemon did not start: " + daemon.err().substr(0, 4000));
    }
    // "Added" and "sealed" are commits: before its commit nobody can see the crawl,
    // and the daemon is woken by the commit. The figures are commit timestamps
    // (track_commit_timestamp, set by scripts/bench for this part), the rows'
    // starts and the process row's started_at (taken right after the spawn).
    // Counted instead from the add's transaction start and from the snapshot's
    // sealed_at (the time inside its transaction), they are context rows.
    enum Figure { added_to_running, add_transaction, begin_to_running, added_to_claimed, sealed_to_sealed,
                  sealed_at_to_sealed_at, k_figures };
    std::vector<std::vector<double>> series(k_figures);
    for (int i = 0; i < samples; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // idle again
        const auto id = b.add({"https://example.com/latency/" + std::to_string(i)});
        if (!wait_sealed(b, id)) {
            throw std::runtime_error("latency crawl did not seal");
        }
        pqxx::work tx(*b.conn);
        const auto r = tx.exec_params1(
            "SELECT extract(epoch FROM running - added), extract(epoch FROM added - c.created_at),"
            "  extract(epoch FROM running - c.created_at), extract(epoch FROM claimed - added),"
            "  extract(epoch FROM pg_xact_commit_timestamp(c.xmin) - snapshot_commit),"
            "  extract(epoch FROM c.sealed_at - snapshot_sealed_at),"
            // Each row's last change is the commit read: its seal (the snapshot's, then
            // the crawl's) or, for the event, its insert by `add`.
            "  pg_xact_commit_timestamp(c.xmin) >= c.sealed_at AND snapshot_commit >= snapshot_sealed_at "
            "FROM crawl c,"
            " LATERAL (SELECT pg_xact_commit_timestamp(e.xmin) AS added FROM event e"
            "          WHERE e.crawl_id = c.id AND e.kind = 'crawl.added') a,"
            // The crawl worker's row: the one of the crawl's workers that runs no snapshot.
            " LATERAL (SELECT min(started_at) AS running FROM process p"
            "          WHERE p.crawl_id = c.id AND p.process_type = 'worker' AND p.snapshot_id IS NULL) w,"
            " LATERAL (SELECT min(started_at) AS claimed, max(sealed_at) AS snapshot_sealed_at,"
            "                 max(pg_xact_commit_timestamp(s.xmin)) AS snapshot_commit"
            "          FROM snapshot s WHERE s.crawl_id = c.id) s "
            "WHERE c.id = $1",
            id);
        tx.commit();
        const bool complete = std::none_of(r.begin(), r.end(), [](const pqxx::field& v) { return v.is_null(); });
        if (!complete || !r[k_figures].as<bool>()) {
            throw std::runtime_error("latency crawl " + id + ": a commit timestamp is missing or precedes its row's "
                                     "own timestamp (is track_commit_timestamp on?)");
        }
        for (int f = 0; f < k_figures; ++f) {
            series[static_cast<std::size_t>(f)].push_back(1000 * r[f].as<double>());
        }
    }
    // Prints a series' p50, p99 and slowest samples; returns {p50, p99}.
    auto summarise = [](const std::string& what, const std::vector<double>& v) {
        const auto p50 = bench::quantile(v, 0.5);
        const auto p99 = bench::quantile(v, 0.99);
        auto slowest = v;
        std::sort(slowest.rbegin(), slowest.rend());
        slowest.resize(std::min<std::size_t>(slowest.size(), 5));
        std::string tail;
        for (const double ms : slowest) {
            tail += " " + bench::fixed(ms);
        }
        std::printf("%s: p50 %s ms, p99 %s ms over %zu samples (slowest:%s ms)\n", what.c_str(),
                    bench::fixed(p50).c_str(), bench::fixed(p99).c_str(), v.size(), tail.c_str());
        return std::pair{p50, p99};
    };
    auto figures = [](std::pair<bench::Figure, bench::Figure> q) {
        return bench::fixed(q.first) + " / " + bench::fixed(q.second);
    };
    const std::string over = ", " + std::to_string(samples) + " crawls of 1 URL, the daemon idle before each";
    auto report = [&](const std::string& what, Figure f, const std::string& window) {
        const auto q = summarise(what, series[f]);
        // Both goals met is the worse of the two, as a share of its limit, at most 1.
        const auto both = bench::measured_if(q.first && q.second, std::max(q.first.value_or(0) / 10, q.second.value_or(0) / 50));
        bench::report_row("4 wake-up " + what + " p50/p99 (ms)", figures(q), "ArchiveBox: 1000-2000 poll", "-",
                          "<= 10 / <= 50", bench::judge(both, {}, [](double worst) { return worst <= 1; }),
                          window + over);
    };
    auto context = [&](const std::string& what, Figure f, const std::string& window) {
        bench::report_context("4 context: " + what + " p50/p99 (ms)", figures(summarise(what, series[f])), "-", "-",
                              window + over);
    };
    report("add committed->crawl_worker running", added_to_running,
           "database: the crawl.added event's commit timestamp -> the crawl worker's process row started_at");
    context("the add's own transaction, begin->commit", add_transaction,
            "database: the crawl row's created_at -> its event's commit timestamp");
    context("add's transaction begin->crawl_worker running", begin_to_running,
            "database: the crawl row's created_at -> the crawl worker's started_at");
    // The row's "running" is the crawl worker's spawn; before its first claim it
    // still loads, connects and creates the snapshot.
    context("add committed->first snapshot claimed by the crawl worker", added_to_claimed,
            "database: the event's commit timestamp -> the snapshot's started_at");
    report("snapshot seal committed->crawl seal committed", sealed_to_sealed,
           "database: the last snapshot seal's commit timestamp -> the crawl seal's");
    context("snapshot sealed_at->crawl sealed_at", sealed_at_to_sealed_at,
            "database: the snapshot's sealed_at -> the crawl's sealed_at");

    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long before = bench::cpu_ticks(daemon.pid());
    const auto sched_before = bench::sched_counts(daemon.pid());
    std::this_thread::sleep_for(std::chrono::seconds(idle_s));
    const long after = bench::cpu_ticks(daemon.pid());
    const auto sched_after = bench::sched_counts(daemon.pid());
    // Clock ticks are 10 ms: over 60 s one tick is 0.017%, and an idle daemon
    // often spends less than one. The scheduler's nanoseconds resolve it; ticks
    // are the fallback on a kernel without schedstat.
    double pct = 100.0 * static_cast<double>(after - before) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / idle_s;
    std::optional<double> wakeups_per_s;
    std::printf("idle daemon: %ld ticks in %d s", after - before, idle_s);
    if (sched_before && sched_after) {
        const auto ns = sched_after->cpu_ns - sched_before->cpu_ns;
        const auto runs = sched_after->runs - sched_before->runs;
        pct = 100.0 * static_cast<double>(ns) / 1e9 / idle_s;
        std::printf("; %.1f ms on a CPU in %lld runs (%.2f/s, %.0f us each)", static_cast<double>(ns) / 1e6,
                    runs, static_cast<double>(runs) / idle_s, runs > 0 ? static_cast<double>(ns) / 1e3 / runs : 0.0);
        wakeups_per_s = static_cast<double>(runs) / idle_s;
    }
    std::printf("\n");
    // A daemon gone before the end (cpu_ticks -1) measured nothing.
    const auto idle = bench::measured_if(before >= 0 && after >= 0, pct);
    const std::string window = "the daemon's CPU (schedstat, else clock ticks) over " + std::to_string(idle_s) +
                               " s with nothing queued";
    bench::report_row("6 idle daemon CPU over " + std::to_string(idle_s) + " s (% of a core)", bench::fixed(idle, 4), "-",
                      "-", "<= 0.1%", bench::judge(idle, {}, [](double p) { return p <= 0.1; }), window);
    if (wakeups_per_s) {
        bench::report_context("6 context: idle daemon, times put on a CPU per second (a loop turn every 5 s, each database reply)",
                              bench::fixed(*wakeups_per_s, 2), "-", "-", window);
    }
    daemon.signal(SIGTERM);
    daemon.wait_for(std::chrono::seconds(30));
}

// One round of rows 2 and 7: our crawl and the recording raw loop next to each
// other, and, for row 2, the bare raw loop beside them. This VM's speed drifts
// by 10-30% over minutes, so each of our runs is compared with the raw run next
// to it; the order alternates from round to round (raw first, then ours first),
// so that neither side always runs on the machine the other left behind.
struct Round {
    CrawlRun raw; // recording: row 2's baseline
    CrawlRun ours;
    std::optional<CrawlRun> bare; // row 2's context
    double ratio() const { return ours.per_s / raw.per_s; }
};

// `rounds` rounds of n URLs, our crawls tagged `tag` and run in `data_dir`
// (default: the bench's own), with the bare loop when `with_bare`; prints each
// round's ratio.
std::vector<Round> paired_rounds(Bench& b, int n, int rounds, const std::string& tag, const fs::path& data_dir = {},
                                 bool with_bare = false)
{
    std::vector<Round> out;
    for (int r = 1; r <= rounds; ++r) {
        Round round;
        if (r % 2 == 1) {
            if (with_bare) {
                round.bare = raw_loop(b, n, false);
            }
            round.raw = raw_loop(b, n, true);
            round.ours = crawl(b, n, tag + std::to_string(r), data_dir);
        } else {
            round.ours = crawl(b, n, tag + std::to_string(r), data_dir);
            round.raw = raw_loop(b, n, true);
            if (with_bare) {
                round.bare = raw_loop(b, n, false);
            }
        }
        std::printf("round %d of %s: ratio %.2f to the recording raw loop\n", r, tag.c_str(), round.ratio());
        out.push_back(round);
    }
    return out;
}

// `field` (a CrawlRun member or a function of one) of each round's run, ours or
// raw as `side` picks.
template <typename Field>
std::vector<double> of_rounds(const std::vector<Round>& rounds, CrawlRun Round::*side, Field field)
{
    std::vector<double> out;
    for (const auto& round : rounds) {
        out.push_back(std::invoke(field, round.*side));
    }
    return out;
}

// The median of `values`, which come from rounds that always run (throws
// std::logic_error when there are none).
double median_of(const std::vector<double>& values)
{
    return bench::value_of(bench::median(values), "rounds");
}

// Each round's `ours(round) / theirs(round)`.
std::vector<double> paired_ratios(const std::vector<Round>& rounds, const std::function<double(const Round&)>& ours,
                                  const std::function<double(const Round&)>& theirs)
{
    std::vector<double> out;
    for (const auto& round : rounds) {
        out.push_back(ours(round) / theirs(round));
    }
    return out;
}

std::vector<double> ratios_of(const std::vector<Round>& rounds)
{
    return paired_ratios(rounds, [](const Round& r) { return r.ours.per_s; }, [](const Round& r) { return r.raw.per_s; });
}

// "median [lowest-highest]" of the rounds' ratios (the median alone for one round).
std::string median_and_range(const std::vector<double>& ratios)
{
    const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
    return bench::fixed(median_of(ratios), 2) +
           (ratios.size() > 1 ? " [" + bench::fixed(*low, 2) + "-" + bench::fixed(*high, 2) + "]" : "");
}

double lowest(const std::vector<double>& values)
{
    return *std::min_element(values.begin(), values.end());
}

// The window of the rows that pair ours with the recording raw loop.
std::string paired_window(int rounds)
{
    return "wall clock, add -> last process gone, both sides; " + std::to_string(rounds) +
           (rounds == 1 ? " pair" : " interleaved pairs, order alternating, median of the paired ratios");
}

// Rows 2, 6 (peak RSS) and 7: `rounds` of our crawl of n URLs paired with the
// recording raw loop (and the bare loop beside them), then the same against
// `history` old rows.
void throughput_and_scale(Bench& b, int n, long history, int rounds)
{
    std::vector<Round> row2;
    long rss_orch = 0;
    long rss_crawl = 0;
    long rss_snap = 0;
    long rss_add = 0;
    std::string anon_mb;
    {
        bench::PeakRssSampler sampler(bin_path("orchestrator").parent_path(), std::chrono::milliseconds(10));
        row2 = paired_rounds(b, n, rounds, "e2e", {}, true);
        rss_orch = sampler.peak_kb("orchestrator");
        rss_crawl = sampler.peak_kb("crawl_worker");
        rss_snap = sampler.peak_kb("snapshot_worker");
        rss_add = sampler.peak_kb("orchestrator add");
        for (const char* name : {"orchestrator", "crawl_worker", "snapshot_worker"}) {
            anon_mb += (anon_mb.empty() ? "" : " / ") + bench::fixed(sampler.peak_anon_kb(name) / 1024.0);
        }
    }
    const std::string window = paired_window(rounds);
    const auto per_s = &CrawlRun::per_s;
    const auto cores = &CrawlRun::cores;
    const double raw = median_of(of_rounds(row2, &Round::raw, per_s));
    const double our_rate = median_of(of_rounds(row2, &Round::ours, per_s));
    const auto ratios = ratios_of(row2);
    const double ratio = median_of(ratios);
    const bool met = our_rate >= 150 && ratio >= 0.5;
    const std::string median_of_rounds = rounds > 1 ? ", median of " + std::to_string(rounds) : "";
    bench::report_row("2 end-to-end " + std::to_string(n) + " URLs x 3 hooks vs raw that records each hook and seal "
                          "(snapshots/s" + median_of_rounds + ")",
                      bench::fixed(our_rate), bench::fixed(raw), median_and_range(ratios), ">= 150/s and >= 0.50",
                      bench::Verdict::of(met), window);
    // The bare loop keeps no records and queues nothing: both sides from their
    // first spawn (ours: the orchestrator's) to the last process gone.
    const auto spawned_rate = [n](const CrawlRun& run) { return n / run.spawned_s; };
    const auto bare_ratios = paired_ratios(
        row2, [&](const Round& r) { return spawned_rate(r.ours); }, [](const Round& r) { return r.bare->per_s; });
    std::vector<double> bare_rates;
    for (const auto& round : row2) {
        bare_rates.push_back(round.bare->per_s);
    }
    bench::report_context("2 context: vs the bare raw loop (no records; snapshots/s without the add)",
                          bench::fixed(median_of(of_rounds(row2, &Round::ours, spawned_rate))),
                          bench::fixed(median_of(bare_rates)), median_and_range(bare_ratios),
                          "wall clock, first spawn -> last process gone (ours without its add; the bare loop queues "
                          "nothing); the same rounds, median of the paired ratios");
    // What the old window left out: ours timed by the database, from the first
    // snapshot created to the last sealed (no start-up, seal of the crawl or
    // teardown), against ours by the wall clock. No ratio: two windows.
    bench::report_context("2 context: ours by the database's timestamps, vs ours by the wall clock (snapshots/s)",
                          bench::fixed(median_of(of_rounds(row2, &Round::ours,
                                                           [n](const CrawlRun& run) { return n / run.pipeline_s; }))),
                          bench::fixed(our_rate) + " (row 2)", "-",
                          "ours only: first snapshot created_at -> last sealed_at, vs row 2's window");
    // What the rates come from, steadier than wall time on a shared machine: CPU
    // of the whole machine (ours, PostgreSQL, the hooks) per snapshot, medians.
    const double our_cpu_ms = median_of(of_rounds(row2, &Round::ours, &CrawlRun::cpu_ms));
    const double raw_cpu_ms = median_of(of_rounds(row2, &Round::raw, &CrawlRun::cpu_ms));
    const auto cpu_ratios = paired_ratios(
        row2, [](const Round& r) { return r.raw.cpu_ms; }, [](const Round& r) { return r.ours.cpu_ms; });
    bench::report_context("2 context: machine CPU per snapshot (ms; ratio raw/ours)", bench::fixed(our_cpu_ms, 2),
                          bench::fixed(raw_cpu_ms, 2), bench::fixed(median_of(cpu_ratios), 2), window);
    // Rate = cores busy / CPU per snapshot: a run that left cores idle (waiting on
    // the disk, say) shows here, not in the CPU row. Lowest of the rounds.
    bench::report_context("2 context: cores busy during the runs, lowest of the rounds (of " +
                              std::to_string(std::thread::hardware_concurrency()) + ")",
                          bench::fixed(lowest(of_rounds(row2, &Round::ours, cores)), 2),
                          bench::fixed(lowest(of_rounds(row2, &Round::raw, cores)), 2), "-", window);
    // Where it goes (medians of each part): what the hooks cost is the same
    // program either way; the difference is ours.
    auto split = [&row2](CrawlRun Round::*side, bool managers) {
        auto part = [&](double CpuSplit::*field) {
            return bench::fixed(median_of(of_rounds(row2, side, [field](const CrawlRun& run) {
                                    return run.split.*field;
                                })),
                                2);
        };
        return part(&CpuSplit::hooks) + " / " + part(&CpuSplit::workers) + " / " +
               (managers ? part(&CpuSplit::managers) : std::string("-")) + " / " + part(&CpuSplit::postgres) +
               " / " + part(&CpuSplit::rest);
    };
    bench::report_context("2 context: CPU ms per snapshot: hooks / workers / orchestrator+crawl worker / "
                          "PostgreSQL / rest",
                          split(&Round::ours, true), split(&Round::raw, false), "-", window);
    // The same rounds with our data directory on tmpfs: what the disk takes from
    // the rate. The raw loop writes no files; ours creates 11 per snapshot, which
    // on an ext4 without a journal, after a mass deletion, read the inode table
    // past every inode deleted in the last minutes (CPU, and waits that leave
    // cores idle); on a journaled ext4 the two rows agree.
    if (bench::TmpfsDir shm; !shm.path().empty()) {
        const auto in_tmpfs = paired_rounds(b, n, rounds, "tmpfs", shm.path());
        bench::report_context("2 context: the same with the data directory on tmpfs, no disk waits (snapshots/s, "
                              "median; lowest cores busy)",
                              bench::fixed(median_of(of_rounds(in_tmpfs, &Round::ours, per_s))) + " (" +
                                  bench::fixed(lowest(of_rounds(in_tmpfs, &Round::ours, cores)), 2) + ")",
                              bench::fixed(median_of(of_rounds(in_tmpfs, &Round::raw, per_s))),
                              median_and_range(ratios_of(in_tmpfs)), window);
    } else {
        std::printf("no tmpfs at /dev/shm: the tmpfs context row is skipped\n");
    }
    // The round trips behind the records (medians of the rounds): ours write
    // more per snapshot in fewer statements.
    bench::report_context("2 context: database transactions per snapshot (ours; raw that records)",
                          bench::fixed(median_of(of_rounds(row2, &Round::ours, &CrawlRun::xacts)), 2),
                          bench::fixed(median_of(of_rounds(row2, &Round::raw, &CrawlRun::xacts)), 2), "-", window);
    // And their volume: a process row per hook with its command line and
    // environment, written at the spawn and again at the exit, the results, the
    // snapshot's claim and seal, each with its index entries.
    const auto wal_ratios = paired_ratios(
        row2, [](const Round& r) { return r.ours.wal_kb; }, [](const Round& r) { return r.raw.wal_kb; });
    bench::report_context("2 context: WAL per snapshot, kB (ours; raw that records)",
                          bench::fixed(median_of(of_rounds(row2, &Round::ours, &CrawlRun::wal_kb)), 1),
                          bench::fixed(median_of(of_rounds(row2, &Round::raw, &CrawlRun::wal_kb)), 1),
                          bench::fixed(median_of(wal_ratios), 1) + "x", window);
    std::printf("snapshot_worker processes in the last e2e crawl: %d for %d snapshots\n", row2.back().ours.workers, n);
    const std::string rss_window = "VmHWM sampled every 10 ms during row 2's rounds";
    for (const auto& [name, kb] : {std::pair{"orchestrator", rss_orch}, {"crawl_worker", rss_crawl},
                                   {"snapshot_worker", rss_snap}}) {
        const auto peak = bench::measured_if(kb > 0, kb / 1024.0);
        bench::report_row(std::string("6 peak RSS ") + name + " (MB)", bench::fixed(peak), "-", "-", "<= 10 MB",
                          bench::judge(peak, {}, [](double mb) { return mb <= 10; }), rss_window);
    }
    // What of that is the programs' own memory; the rest is file pages (binary,
    // libc, libpq and what it links: libcrypto, gnutls, krb5, ...).
    bench::report_context("6 context: peak anonymous RSS orchestrator / crawl_worker / snapshot_worker (MB)",
                          anon_mb, "-", "-", rss_window);
    // The command that queued each crawl: the same binary, but a client that
    // exits in a moment, not re-executed lean (GnuTLS initialises itself in it,
    // about 0.8 MB): kept out of the orchestrator's row.
    bench::report_context("6 context: peak RSS of the one-shot `orchestrator add` of " + std::to_string(n) +
                              " URLs (MB)",
                          bench::fixed(rss_add / 1024.0), "-", "-", rss_window);
    if (history <= 0) {
        return; // no row 7
    }
    fill_history(b, history);
    // Row 7 compares two sets of crawls minutes apart, across which this VM's
    // speed drifts by 10-30% (hooks, which never touch the database, moved as
    // much as the rest): each round pairs the crawl with a recording raw loop
    // next to it, as row 2's rounds do, and the figure is the ratio of the two
    // rows' median paired ratios. The raw loop's tables hold none of the history.
    const auto scaled = paired_rounds(b, n, rounds, "scale");
    const double scale_rate = median_of(of_rounds(scaled, &Round::ours, per_s));
    const double scale_vs_row2 = median_of(ratios_of(scaled)) / ratio;
    const std::string rows = history >= 1'000'000 ? std::to_string(history / 1'000'000) + "M"
                                                  : std::to_string(history / 1000) + "k";
    bench::report_row("7 scale: row 2 with " + rows + " old snapshots+processes (snapshots/s" + median_of_rounds +
                          "; ratio of the rows' ratios to raw)",
                      bench::fixed(scale_rate), bench::fixed(our_rate) + " (row 2)", bench::fixed(scale_vs_row2, 2),
                      ">= 0.80", bench::Verdict::of(scale_vs_row2 >= 0.8),
                      window + ", for each of rows 7 and 2");
    bench::report_context("7 context: the same, rates alone (unpaired, minutes apart: no ratio)",
                          bench::fixed(scale_rate), bench::fixed(our_rate) + " (row 2)", "-", window);
}

} // namespace

int main(int argc, char** argv)
{
    const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
    const long history = argc > 2 ? std::atol(argv[2]) : 1'000'000;
    const int samples = argc > 3 ? std::atoi(argv[3]) : 100;
    const int idle_s = argc > 4 ? std::atoi(argv[4]) : 60;
    try {
        Bench b;
        crawl(b, n > 0 ? std::min(n, 20) : 20, "warmup");
        if (n > 0) {
            throughput_and_scale(b, n, history, std::max(1, argc > 5 ? std::atoi(argv[5]) : 3));
        }
        if (samples > 0) {
            latency_and_idle(b, samples, idle_s);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_crawl: %s\n", e.what());
        return 1;
    }
    return 0;
}
