#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

using namespace orch::test;

namespace {

// Processes whose command line mentions `needle` (checked from /proc, not from any table).
int processes_mentioning(const std::string& needle)
{
    int count = 0;
    DIR* proc = ::opendir("/proc");
    while (auto* e = ::readdir(proc)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        count += cmd.find(needle) != std::string::npos;
    }
    ::closedir(proc);
    return count;
}

// Stops the private cluster of a data directory when the test ends, however it
// ends: a failed REQUIRE must not leave a server running in (or on top of) a
// directory that is then removed. Declared after the ScratchDir it lives in.
class ClusterStopper {
public:
    ClusterStopper(std::string orchestrator, std::string data_dir, std::map<std::string, std::string> env)
        : m_orchestrator(std::move(orchestrator)), m_data_dir(std::move(data_dir)), m_env(std::move(env))
    {
    }
    ~ClusterStopper()
    {
        try {
            // "not running" (exit 0) when the test stopped it already.
            run_command({m_orchestrator, "db", "stop", "--data-dir", m_data_dir}, m_env);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warning: could not stop the cluster in %s: %s\n", m_data_dir.c_str(), e.what());
        }
    }
    ClusterStopper(const ClusterStopper&) = delete;
    ClusterStopper& operator=(const ClusterStopper&) = delete;

private:
    std::string m_orchestrator;
    std::string m_data_dir;
    std::map<std::string, std::string> m_env;
};

} // namespace

TEST_CASE("with no DATABASE_URL the private cluster under the data directory is used - and nothing is left running",
          "[embedded]")
{
    ScratchDir dir("orch-emb-");
    ::chmod(dir.path().c_str(), 0755); // as root the server runs as `postgres`, which must reach it
    auto data = (dir / "data").string();
    auto orchestrator = bin_path("orchestrator").string();
    std::map<std::string, std::string> no_db{{"DATABASE_URL", ""}, {"TEST_DATABASE_URL", ""}};
    ClusterStopper stopper(orchestrator, data, no_db);

    auto r = run_command({orchestrator, "add", "http://a.test/", "--data-dir", data}, no_db);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(std::ifstream(data + "/pg/cluster/PG_VERSION").good());
    CHECK(processes_mentioning(data + "/pg/cluster") == 0);
    auto status = run_command({orchestrator, "db", "status", "--data-dir", data}, no_db);
    CHECK(status.exit_code == 3);

    // Second use finds the crawl the first stored.
    auto second = run_command({orchestrator, "add", "http://b.test/", "--data-dir", data}, no_db);
    REQUIRE(second.exit_code == 0);
    auto started = run_command({orchestrator, "db", "start", "--data-dir", data}, no_db);
    REQUIRE(started.exit_code == 0);
    auto conninfo = started.out.substr(0, started.out.find('\n'));
    CHECK(conninfo.find(data + "/pg/run") != std::string::npos);
    {
        pqxx::connection conn(conninfo);
        pqxx::read_transaction tx(conn);
        CHECK(tx.exec1("SELECT count(*) FROM crawl")[0].as<int>() == 2);
        // Unix socket only: the server listens on no TCP port.
        CHECK(tx.exec1("SHOW listen_addresses")[0].as<std::string>().empty());
    }
    // Explicitly started: a one-shot user leaves it running.
    auto third = run_command({orchestrator, "add", "http://c.test/", "--data-dir", data}, no_db);
    CHECK(third.exit_code == 0);
    CHECK(run_command({orchestrator, "db", "status", "--data-dir", data}, no_db).exit_code == 0);
    CHECK(run_command({orchestrator, "db", "stop", "--data-dir", data}, no_db).exit_code == 0);
    CHECK(processes_mentioning(data + "/pg/cluster") == 0);
}

namespace {

// Whether an orchestrator row of `machine` runs in the embedded cluster at `conninfo`
// (false while the server is not up yet).
bool orchestrator_running(const std::string& conninfo, const std::string& machine)
{
    try {
        pqxx::connection conn(conninfo);
        pqxx::read_transaction tx(conn);
        return tx.exec_params1("SELECT count(*) FROM process WHERE process_type = 'orchestrator' "
                               "AND status = 'running' AND machine_id = $1",
                               machine)[0]
                   .as<int>() == 1;
    } catch (const std::exception&) {
        return false;
    }
}

} // namespace

TEST_CASE("two daemons on one data directory share its embedded cluster - it stays up while either runs - the last "
          "to leave stops it",
          "[embedded]")
{
    ScratchDir dir("orch-emb2-");
    ::chmod(dir.path().c_str(), 0755); // as root the server runs as `postgres`, which must reach it
    auto data = (dir / "data").string();
    auto orchestrator = bin_path("orchestrator").string();
    std::map<std::string, std::string> no_db{{"DATABASE_URL", ""}, {"TEST_DATABASE_URL", ""}};
    ClusterStopper stopper(orchestrator, data, no_db); // after the daemons are gone, however the test ends
    std::filesystem::create_directories(dir / "plugins"); // an empty plugins dir: no hooks, nothing to refuse
    const EnvChanges env{{"DATABASE_URL", std::nullopt}, {"TEST_DATABASE_URL", std::nullopt},
                         {"ORCH_BUILTIN_PLUGINS_DIR", ""}, {"PLUGINS_DIR", (dir / "plugins").string()}};
    auto daemon = [&](const std::string& machine) {
        return std::make_unique<SpawnedProcess>(std::vector<std::string>{orchestrator, "--daemon", "--data-dir", data,
                                                                         "--machine-id", machine},
                                                env);
    };
    auto url = run_command({orchestrator, "db", "url", "--data-dir", data}, no_db);
    REQUIRE(url.exit_code == 0);
    const auto conninfo = url.out.substr(0, url.out.find('\n'));
    auto status = [&] { return run_command({orchestrator, "db", "status", "--data-dir", data}, no_db).exit_code; };
    REQUIRE(status() == 3);

    // The first starts the server on demand; the second joins it.
    auto first = daemon("emb-first");
    const auto gone = [](SpawnedProcess& p) { return p.wait_for(std::chrono::milliseconds(0)); };
    REQUIRE(eventually([&] { return gone(*first) || orchestrator_running(conninfo, "emb-first"); },
                       std::chrono::seconds(60)));
    INFO("first: " << first->err());
    REQUIRE_FALSE(first->exited());
    auto second = daemon("emb-second");
    REQUIRE(eventually([&] { return gone(*second) || orchestrator_running(conninfo, "emb-second"); },
                       std::chrono::seconds(30)));
    INFO("second: " << second->err());
    REQUIRE_FALSE(second->exited());
    CHECK(status() == 0);
    CHECK(processes_mentioning(data + "/pg/cluster") >= 1);

    // The one that started it leaves first: the server stays up for the other.
    first->signal(SIGTERM);
    REQUIRE(first->wait_for(std::chrono::seconds(30)));
    INFO("first: " << first->err());
    CHECK(first->exit_code() == 0);
    CHECK(first->err().find("last user left") == std::string::npos);
    // A stop on its way out would have come before its exit: the server is up now.
    CHECK(status() == 0);
    CHECK(orchestrator_running(conninfo, "emb-second"));
    CHECK_FALSE(gone(*second));
    // The remaining user never lost its connection.
    CHECK(second->err().find("lost the database connection") == std::string::npos);

    // The last one out stops it: no server process is left, `db status` says stopped.
    second->signal(SIGTERM);
    REQUIRE(second->wait_for(std::chrono::seconds(30)));
    INFO("second: " << second->err());
    CHECK(second->exit_code() == 0);
    CHECK(second->err().find("embedded PostgreSQL stopped (last user left)") != std::string::npos);
    CHECK(status() == 3);
    CHECK(eventually([&] { return processes_mentioning(data + "/pg/cluster") == 0; }, std::chrono::seconds(10)));
}
