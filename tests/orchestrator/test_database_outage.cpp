// A PostgreSQL outage while a crawl runs (common/db/database_outage.hpp): within
// DB_OUTAGE_GRACE every process waits for the server, its children running on,
// and nothing runs twice; past it they exit 4, and the next run finishes the
// crawl. The server is a private cluster of the test's own (restarting the
// shared test cluster would cut every other test's connections).
#include "tests/chaos/pg_control.hpp"
#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <pqxx/pqxx>

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

using namespace orch::test;
namespace fs = std::filesystem;

namespace {

// The test's own cluster under `data` (`orchestrator db start`), stopped however the test ends.
class PrivateCluster {
public:
    explicit PrivateCluster(fs::path data) : m_data(std::move(data))
    {
        auto r = run_command({bin_path("orchestrator").string(), "db", "start", "--data-dir", m_data.string(),
                              "--log-level", "warn"},
                             k_no_db);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        m_conninfo = r.out.substr(0, r.out.find('\n'));
    }
    ~PrivateCluster()
    {
        try {
            orch::chaos::PgControl pg(m_data);
            if (pg.available() && !pg.running()) {
                pg.start(); // `db stop` stops a running cluster only
            }
            run_command({bin_path("orchestrator").string(), "db", "stop", "--data-dir", m_data.string()}, k_no_db);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warning: could not stop the cluster in %s: %s\n", m_data.c_str(), e.what());
        }
    }
    PrivateCluster(const PrivateCluster&) = delete;
    PrivateCluster& operator=(const PrivateCluster&) = delete;

    const std::string& conninfo() const { return m_conninfo; }
    long count(const std::string& sql) const
    {
        pqxx::connection conn(m_conninfo);
        return pqxx::nontransaction(conn).exec1(sql)[0].as<long>();
    }

private:
    static inline const std::map<std::string, std::string> k_no_db{{"DATABASE_URL", ""}, {"TEST_DATABASE_URL", ""}};
    fs::path m_data;
    std::string m_conninfo;
};

// A crawl of 4 URLs whose one hook blocks until the test releases it (or of
// `urls` URLs, with the hooks `write_hooks` writes), added to the private
// cluster; the orchestrator is then started on it with `grace` as DB_OUTAGE_GRACE.
struct OutageRun {
    OrchFixture f;
    fs::path data;
    std::unique_ptr<PrivateCluster> cluster;
    // The blocking hook writes its pid to `blocked`, then waits while `hold`
    // exists (bounded, so that a kept temp root leaks nothing for long).
    fs::path hold = f.root / "hold";
    fs::path blocked = f.root / "blocked";

    OutageRun()
        : OutageRun(
              [](OrchFixture& f) {
                  std::ofstream(f.root / "hold") << "1";
                  f.write_logging_hook("slow", "on_Snapshot__10_slow.sh", 0,
                                       "echo \"$$\" >> '" + (f.root / "blocked").string() + "'\n"
                                       "while [ -e '" + (f.root / "hold").string() +
                                           "' ] && (( SECONDS < 120 )); do sleep 0.05; done\n");
              },
              4)
    {
    }
    OutageRun(const std::function<void(OrchFixture&)>& write_hooks, int urls)
    {
        ::chmod(f.root.path().c_str(), 0755); // as root the server runs as `postgres`, which must reach it
        data = f.root.path() / "outage-data";
        fs::create_directories(data);
        cluster = std::make_unique<PrivateCluster>(data);
        write_hooks(f);
        std::vector<std::string> add{bin_path("orchestrator").string(), "add", "--database-url", cluster->conninfo(),
                                     "--data-dir", data.string()};
        for (const auto& url : OrchFixture::site_urls(urls)) {
            add.push_back(url);
        }
        auto r = run_command(add);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
    }

    std::unique_ptr<SpawnedProcess> start(const std::string& grace, EnvChanges extra = {})
    {
        extra["DB_OUTAGE_GRACE"] = grace;
        return std::make_unique<SpawnedProcess>(
            std::vector<std::string>{bin_path("orchestrator").string(), "--database-url", cluster->conninfo(),
                                     "--data-dir", data.string(), "--machine-id", "machine-outage",
                                     "--max-snapshot-workers", "4"},
            f.env(extra));
    }

    // Waits until every blocking hook is running: 4 live pids that wrote their
    // marker, each then held until release_hooks(). A logged start alone would
    // not do: under load a hook that only slept could be over before the outage.
    void wait_hooks_running()
    {
        REQUIRE(eventually([&] { return blocked_alive() >= 4; }, std::chrono::seconds(30)));
    }
    // Lets the blocking hooks finish (those running end within 50 ms, later ones do not block).
    void release_hooks() { fs::remove(hold); }
    std::size_t blocked_alive() const
    {
        std::set<int> live;
        std::istringstream in(read_file_text(blocked));
        for (std::string line; std::getline(in, line);) {
            int pid = std::atoi(line.c_str());
            if (pid > 0 && ::kill(pid, 0) == 0 &&
                read_file_text("/proc/" + line + "/cmdline").find("on_Snapshot__10_slow.sh") != std::string::npos) {
                live.insert(pid);
            }
        }
        return live.size();
    }

    // Crash-only after a run the outage ended: the next run's recovery closes
    // what the first left and finishes the crawl (the hooks it interrupted run
    // again). Starts the server first.
    void next_run_finishes(orch::chaos::PgControl& pg)
    {
        REQUIRE(pg.start());
        auto second = start("30");
        REQUIRE(second->wait_for(std::chrono::seconds(60)));
        INFO(describe(*second));
        CHECK(second->exit_code() == 0);
        CHECK(cluster->count("SELECT count(*) FROM crawl WHERE status = 'sealed' AND outcome = 'succeeded'") == 1);
        CHECK(cluster->count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    }
};

} // namespace

TEST_CASE("a PostgreSQL restart mid-crawl is ridden out: hooks run on - none runs twice - all exit 0", "[outage]")
{
    OutageRun run;
    auto orchestrator = run.start("30");
    run.wait_hooks_running();

    orch::chaos::PgControl pg(run.data);
    REQUIRE(pg.available());
    REQUIRE(pg.restart());
    // The hooks ran through the whole restart: each is still held, alive.
    CHECK(run.blocked_alive() == 4);
    run.release_hooks();

    REQUIRE(orchestrator->wait_for(std::chrono::seconds(60)));
    INFO(describe(*orchestrator));
    CHECK(orchestrator->exit_code() == 0);
    CHECK(orchestrator->err().find("lost the database connection") != std::string::npos);
    CHECK(orchestrator->err().find("database connection back") != std::string::npos);

    // One run per snapshot, each finished; every row closed, no worker exit 4.
    const auto runs = run.f.hook_runs();
    std::set<std::string> snapshots;
    for (const auto& r : runs) {
        CHECK(r.end.has_value());
        snapshots.insert(r.snapshot);
    }
    CHECK(runs.size() == 4);
    CHECK(snapshots.size() == 4);
    CHECK(run.cluster->count("SELECT count(*) FROM crawl WHERE status = 'sealed' AND outcome = 'succeeded'") == 1);
    CHECK(run.cluster->count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 4);
    CHECK(run.cluster->count("SELECT count(*) FROM process WHERE process_type = 'hook'") == 4);
    CHECK(run.cluster->count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(run.cluster->count("SELECT count(*) FROM process WHERE exit_code <> 0") == 0);
    // Journaled once, by the orchestrator, with how long it lasted.
    CHECK(run.cluster->count("SELECT count(*) FROM event WHERE kind = 'database.outage' "
                             "AND actor = 'orchestrator' AND (detail->>'down_ms')::int > 0") == 1);
}

TEST_CASE("an outage longer than DB_OUTAGE_GRACE ends the run with exit 4 - and the next run finishes the crawl",
          "[outage]")
{
    OutageRun run;
    auto orchestrator = run.start("1");
    run.wait_hooks_running();

    orch::chaos::PgControl pg(run.data);
    REQUIRE(pg.available());
    REQUIRE(pg.stop());
    // Held through the outage: the run it ends is mid-crawl, its hooks interrupted.
    CHECK(run.blocked_alive() == 4);
    REQUIRE(orchestrator->wait_for(std::chrono::seconds(30)));
    INFO(describe(*orchestrator));
    CHECK(orchestrator->exit_code() == 4);
    CHECK(orchestrator->err().find("past the outage grace") != std::string::npos);
    run.release_hooks();
    run.next_run_finishes(pg);
    CHECK(run.cluster->count("SELECT count(*) FROM archive_result WHERE status = 'succeeded'") == 4);
}

namespace {

// Seconds since the epoch, as bash's $EPOCHREALTIME gives them.
double epoch_now()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The time of the first "<what>" line of hook `hook` in the hook log; 0 when there is none.
double logged(const OrchFixture& f, const std::string& hook, const std::string& what)
{
    std::istringstream in(read_file_text(f.hook_log));
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string snapshot, name, pid, kind;
        double when = 0;
        if (fields >> snapshot >> name >> pid >> kind >> when && name == hook && kind == what) {
            return when;
        }
    }
    return 0;
}

} // namespace

TEST_CASE("a hook timeout that falls in an outage is kept on time - while its worker is blocked on the database",
          "[outage]")
{
    OutageRun run(
        [](OrchFixture& f) {
            const auto log = "'" + f.hook_log.string() + "'";
            f.write_hook("hang", "on_Snapshot__10_hang.sh",
                         "echo \"$snap hang $$ start $EPOCHREALTIME\" >> " + log + "\n" +
                             "sleep 30 &\n"
                             "trap 'echo \"$snap hang $$ term $EPOCHREALTIME\" >> " + log +
                             "; kill $! 2>/dev/null; exit 143' TERM\n"
                             "wait\n");
        },
        1);
    // A lease of 2 s is renewed every 0.7 s: the snapshot worker meets the
    // outage, and blocks in it, well before the hook's 2 s are up.
    auto orchestrator = run.start("30", {{"LEASE_TTL", "2"}, {"HANG_TIMEOUT", "2"}});
    REQUIRE(eventually([&] { return logged(run.f, "hang", "start") > 0; }, std::chrono::seconds(30)));
    const double started = logged(run.f, "hang", "start");

    orch::chaos::PgControl pg(run.data);
    REQUIRE(pg.available());
    REQUIRE(pg.stop());
    const double stopped = epoch_now();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, started + 5.0 - epoch_now())));
    const double healed = epoch_now();
    REQUIRE(pg.start());

    REQUIRE(orchestrator->wait_for(std::chrono::seconds(60)));
    INFO(describe(*orchestrator));
    CHECK(orchestrator->exit_code() == 0);
    // The SIGTERM came at the hook's timeout, while the server was down; not
    // once it was back.
    const double termed = logged(run.f, "hang", "term");
    INFO("started " << std::to_string(started) << " stopped " << std::to_string(stopped) << " termed "
                    << std::to_string(termed) << " healed " << std::to_string(healed));
    REQUIRE(termed > 0);
    CHECK(stopped < started + 2.0); // the outage began before the timeout
    CHECK(termed - started >= 1.9);
    CHECK(termed < healed);
    // Recorded as a timeout once the database was back, and the crawl finished.
    CHECK(run.cluster->count("SELECT count(*) FROM process WHERE process_type = 'hook' AND status = 'exited' "
                             "AND end_reason = 'timed_out'") == 1);
    CHECK(run.cluster->count("SELECT count(*) FROM archive_result WHERE status = 'failed' "
                             "AND error ILIKE '%timed out%'") == 1);
    CHECK(run.cluster->count("SELECT count(*) FROM crawl WHERE status = 'sealed'") == 1);
    CHECK(run.cluster->count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
}

namespace {

bool process_gone(int pid)
{
    // Not our children (our child is the orchestrator): a dead one is reaped by
    // its parent or by init, and its pid disappears.
    return ::kill(pid, 0) != 0 && errno == ESRCH;
}

} // namespace

TEST_CASE("a stop while the database is down tears every tree down with its grace - no process is left - the next "
          "run finishes the crawl",
          "[outage]")
{
    OutageRun run(
        [](OrchFixture& f) {
            const auto log = "'" + f.hook_log.string() + "'";
            const auto quick = "'" + (f.root.path() / "quick").string() + "'";
            // Each hook leaves a child of its own, as a browser would.
            f.write_logging_hook("slow", "on_Snapshot__10_slow.sh", 0,
                                 "if [ ! -e " + quick + " ]; then\n"
                                 "  sleep 60 &\n"
                                 "  echo \"$snap child $! start $EPOCHREALTIME\" >> " + log + "\n"
                                 "  wait\n"
                                 "fi\n");
        },
        4);
    auto orchestrator = run.start("30");
    REQUIRE(eventually([&] { return run.f.hook_runs().size() >= 8; }, std::chrono::seconds(30)));
    std::vector<int> pids;
    for (const auto& r : run.f.hook_runs()) {
        pids.push_back(r.pid);
    }
    {
        pqxx::connection conn(run.cluster->conninfo());
        for (const auto& row : pqxx::nontransaction(conn).exec(
                 "SELECT pid FROM process WHERE process_type = 'worker' AND status = 'running'")) {
            pids.push_back(row[0].as<int>());
        }
    }
    REQUIRE(pids.size() >= 8 + 2); // the hooks, their children, a crawl worker and the snapshot workers

    orch::chaos::PgControl pg(run.data);
    REQUIRE(pg.available());
    REQUIRE(pg.stop());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    orchestrator->signal(SIGTERM);
    REQUIRE(orchestrator->wait_for(std::chrono::seconds(60)));
    INFO(describe(*orchestrator));
    // What it ran could not be recorded: the run ends as an outage does.
    CHECK(orchestrator->exit_code() == 4);
    CHECK(orchestrator->err().find("stop requested while the database is unreachable") != std::string::npos);
    // One SIGTERM is a stop with its grace, not the second one that kills at once.
    CHECK(orchestrator->err().find("killing every tree now") == std::string::npos);
    CHECK(orchestrator->err().find("teardown phase 1: SIGTERM") != std::string::npos);
    // Each level stopped its children within their grace: no tree needed its
    // SIGKILL, and no worker sat out DB_OUTAGE_GRACE while its parent's deadline
    // ran (a stopping process gives a lost connection one look).
    std::string logs = orchestrator->err();
    for (const auto& entry : fs::recursive_directory_iterator(run.data / "crawls")) {
        if (entry.path().string().find(".stderr.log") != std::string::npos &&
            entry.path().filename().string().find("_worker.") != std::string::npos) {
            logs += read_file_text(entry.path());
        }
    }
    CHECK(logs.find("crawl_worker") != std::string::npos);
    CHECK(logs.find("snapshot_worker") != std::string::npos);
    CHECK(logs.find("teardown phase 3: SIGKILL") == std::string::npos);
    CHECK(logs.find("past the outage grace") == std::string::npos);
    // Nothing outlives it: before, the workers' trees were SIGKILLed at once, the
    // kill reached the crawl worker's own cgroup only, and its snapshot workers
    // and their hooks ran on, unsupervised, until the next start's recovery.
    for (int pid : pids) {
        INFO("pid " << pid);
        CHECK(eventually([&] { return process_gone(pid); }, std::chrono::seconds(5)));
    }

    std::ofstream(run.f.root.path() / "quick").put('\n'); // the hooks run again, briefly
    run.next_run_finishes(pg);
}

namespace {

// The earliest hook start in the hook log after `since` (0 when there is none yet).
double first_start_after(const OrchFixture& f, double since)
{
    double first = 0;
    for (const auto& r : f.hook_runs()) {
        if (r.start > since && (first == 0 || r.start < first)) {
            first = r.start;
        }
    }
    return first;
}

} // namespace

TEST_CASE("after a PostgreSQL restart the idle daemon ridden out is woken by LISTEN/NOTIFY again - an added crawl "
          "starts at once",
          "[outage]")
{
    OrchFixture f;
    ::chmod(f.root.path().c_str(), 0755); // as root the server runs as `postgres`, which must reach it
    const auto data = f.root.path() / "outage-data";
    fs::create_directories(data);
    PrivateCluster cluster(data);
    f.write_logging_hook("quick", "on_Snapshot__10_quick.sh", 0);
    // Polled once in 10 minutes: a prompt start is a notification. (The loop also
    // wakes for its recovery pass every 15 s; three prompt starts in a row are not
    // that by chance.)
    SpawnedProcess daemon({bin_path("orchestrator").string(), "--daemon", "--poll-interval", "600", "--database-url",
                           cluster.conninfo(), "--data-dir", data.string(), "--machine-id", "machine-notify"},
                          f.env({{"DB_OUTAGE_GRACE", "60"}}));
    REQUIRE(eventually(
        [&] {
            return cluster.count("SELECT count(*) FROM process WHERE process_type = 'orchestrator' AND status = "
                                 "'running'") == 1;
        },
        std::chrono::seconds(30)));
    int added = 0;
    // Adds one crawl of one URL; returns the seconds from just before the add to its hook's start.
    auto add_and_time_start = [&] {
        const double before = epoch_now();
        auto r = run_command({bin_path("orchestrator").string(), "add", "--database-url", cluster.conninfo(),
                              "--data-dir", data.string(), fmt::format("http://notify{}.test/", ++added)});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        double started = 0;
        INFO(describe(daemon));
        REQUIRE(eventually([&] { return (started = first_start_after(f, before)) > 0; }, std::chrono::seconds(40)));
        REQUIRE(eventually(
            [&] { return cluster.count("SELECT count(*) FROM crawl WHERE status <> 'sealed'") == 0; },
            std::chrono::seconds(30)));
        return started - before;
    };
    const double baseline = add_and_time_start();
    MEASURE("outage notify: add to hook start before the restart " << baseline << " s");
    CHECK(baseline < 3.0);

    orch::chaos::PgControl pg(data);
    REQUIRE(pg.available());
    REQUIRE(pg.restart());
    // The idle daemon meets the restart on its listening socket and reconnects.
    CHECK(eventually([&] { return daemon.err().find("database connection back") != std::string::npos; },
                     std::chrono::seconds(30)));
    for (int i = 0; i < 3; ++i) {
        const double latency = add_and_time_start();
        MEASURE("outage notify: add to hook start after the restart " << latency << " s");
        CHECK(latency < 3.0);
    }
    CHECK_FALSE(daemon.exited());
    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait_for(std::chrono::seconds(30)));
    INFO(describe(daemon));
    CHECK(daemon.exit_code() == 0);
    CHECK(cluster.count("SELECT count(*) FROM crawl WHERE status = 'sealed' AND outcome = 'succeeded'") == 4);
}
