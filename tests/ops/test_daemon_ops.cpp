#include "tests/ops/http_exchange.hpp"
#include "common/base/fd.hpp"
#include "tests/ops/prom_parser.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <regex>
#include <sstream>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

using namespace orch;
using namespace orch::test;

namespace {

// A Unix datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
public:
    explicit NotifySocket(const std::filesystem::path& path) : m_path(path)
    {
        m_fd = Fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        REQUIRE(m_fd);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        REQUIRE(::bind(m_fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    // The next datagram within `timeout`; empty if none came.
    std::string receive(std::chrono::milliseconds timeout)
    {
        pollfd p{m_fd.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
            return {};
        }
        char buf[4096];
        auto n = ::recv(m_fd.get(), buf, sizeof buf, 0);
        return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    }

private:
    std::filesystem::path m_path;
    Fd m_fd;
};

} // namespace

TEST_CASE("ops: the daemon says READY=1 after recovery with its row running - STOPPING=1 on SIGTERM - and serves "
          "metrics meanwhile",
          "[ops][daemon]")
{
    ScratchDatabase db;
    ScratchDir dir("orch-notify-"); // outlives the daemon below
    NotifySocket notify(dir / "notify.sock");
    auto machine = fmt::format("ops-notify-{}", ::getpid());
    SpawnedProcess daemon({bin_path("orchestrator").string(), "--daemon", "--database-url", db.url(), "--data-dir",
                           (dir / "data").string(), "--machine-id", machine, "--metrics-listen", "127.0.0.1:0",
                           "--log-format", "json"},
                          {{"NOTIFY_SOCKET", (dir / "notify.sock").string()}, {"WATCHDOG_USEC", "400000"}});
    auto ready = notify.receive(std::chrono::seconds(20));
    INFO(daemon.err());
    REQUIRE(ready.find("READY=1") != std::string::npos);
    // WatchdogSec=0.4 s: fed every 0.2 s by the idle main loop, on a timer of
    // its own (its 5 s poll, 10 s heartbeat and 15 s recovery do not delay it).
    {
        // From the next ping on (what queued since READY is passed over), ten
        // pings as they come. Ten take 1.8 s at 0.2 s; the deadline, 6 s, is
        // generous for a loaded machine yet out of reach of a loop fed only when
        // something else wakes it (two or three wake-ups in 6 s).
        while (!notify.receive(std::chrono::milliseconds(0)).empty()) {
        }
        using Clock = std::chrono::steady_clock;
        std::vector<Clock::time_point> pings;
        const auto deadline = Clock::now() + std::chrono::seconds(6);
        while (pings.size() < 10 && Clock::now() < deadline) {
            if (notify.receive(std::chrono::milliseconds(100)).find("WATCHDOG=1") != std::string::npos) {
                pings.push_back(Clock::now());
            }
        }
        REQUIRE(pings.size() == 10);
        const auto span = std::chrono::duration<double>(pings.back() - pings.front()).count();
        INFO("ten watchdog pings at WATCHDOG_USEC=0.4 s over " << span << " s");
        // Not fed in a busy loop: nine intervals of 0.2 s are 1.8 s; half of that
        // leaves room for pings that queued while the test was not scheduled.
        CHECK(span >= 0.9);
    }
    {
        auto conn = db.connect();
        pqxx::read_transaction tx(*conn);
        CHECK(tx.exec_params1("SELECT count(*) FROM process WHERE process_type = 'orchestrator' AND status = 'running' "
                              "AND machine_id = $1 AND pid = $2",
                              machine, daemon.pid())[0]
                  .as<int>() == 1);
    }
    // The daemon probes containment for its supervisor and for recovery; it says so once.
    {
        int probed = 0;
        std::istringstream lines(daemon.err());
        for (std::string line; std::getline(lines, line);) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            probed += !j.is_discarded() && j.value("msg", "") == "containment probed";
        }
        CHECK(probed == 1);
    }
    // Recovery ran before READY: the machine row was registered with its containment by then.
    {
        auto conn = db.connect();
        pqxx::read_transaction tx(*conn);
        CHECK(tx.exec_params1("SELECT containment IS NOT NULL FROM machine WHERE id = $1", machine)[0].as<bool>());
    }

    // The metrics server's port is in the JSON log line "metrics listening".
    int port = 0;
    REQUIRE(eventually([&] { return (port = metrics_port_in_log(daemon.err())) != 0; }, std::chrono::seconds(5)));
    auto response = scrape_metrics(static_cast<std::uint16_t>(port));
    REQUIRE(response.rfind("HTTP/1.1 200 OK", 0) == 0);
    auto body = response.substr(response.find("\r\n\r\n") + 4);
    INFO(body);
    auto families = parse_prometheus(body);
    CHECK(families.count("orchestrator_build_info") == 1);
    CHECK(body.find("orchestrator_processes{type=\"orchestrator\",state=\"running\"} 1\n") != std::string::npos);
    CHECK(families.count("orchestrator_process_exits_total") == 1);
    CHECK(families.count("orchestrator_process_duration_seconds") == 1);
    CHECK(families.count("orchestrator_leases_recovered_total") == 1);
    CHECK(families.count("orchestrator_db_errors_total") == 1);
    CHECK(families.count("orchestrator_events_total") == 1);
    CHECK(body.find("orchestrator_events_total{kind=\"snapshot.gave_up\"} 0\n") != std::string::npos);
    for (const auto& [name, family] : families) {
        for (const auto& sample : family.samples) {
            CHECK(sample.labels.count("crawl_id") == 0);
            CHECK(sample.labels.count("pid") == 0);
        }
    }

    // Its own start, counted once the 10 s commit lag has passed.
    CHECK(eventually(
        [&] {
            auto later = scrape_metrics(static_cast<std::uint16_t>(port));
            return later.find("orchestrator_events_total{kind=\"orchestrator.started\"} 1\n") != std::string::npos;
        },
        std::chrono::seconds(25)));

    daemon.signal(SIGTERM);
    // Watchdog pings queued before it come first.
    std::string stopping;
    for (int i = 0; i < 200 && stopping.find("STOPPING=1") == std::string::npos; ++i) {
        stopping = notify.receive(std::chrono::seconds(20));
    }
    CHECK(stopping.find("STOPPING=1") != std::string::npos);
    REQUIRE(daemon.wait_for(std::chrono::seconds(30)));
    CHECK(daemon.exit_code() == 0);

    // --log-format json: one object per line, each with the process row id once registered.
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    auto self_id = tx.exec_params1("SELECT id FROM process WHERE machine_id = $1 AND process_type = 'orchestrator'",
                                   machine)[0]
                       .as<std::string>();
    std::istringstream lines(daemon.err());
    int with_self = 0;
    for (std::string line; std::getline(lines, line);) {
        INFO(line);
        auto j = nlohmann::json::parse(line);
        CHECK(j.contains("ts"));
        CHECK(j.contains("level"));
        CHECK(j["program"] == "orchestrator");
        CHECK(j["pid"] == daemon.pid());
        if (j.contains("self")) {
            CHECK(j["self"] == self_id);
            ++with_self;
        }
    }
    CHECK(with_self >= 2);
}

namespace {

// A crawl worker run on a crawl cancelled before it starts (it claims, seals it
// cancelled and exits 0 without hooks), logging in `format`; returns its stderr
// and sets `crawl_id`.
std::string cancelled_crawl_worker_log(const ScratchDatabase& db, const ScratchDir& dir, const std::string& format,
                                       std::string& crawl_id)
{
    {
        auto conn = db.connect();
        pqxx::work tx(*conn);
        crawl_id = tx.exec1("INSERT INTO crawl (urls, cancel_requested_at) VALUES ('{http://a.test/}', now()) "
                            "RETURNING id")[0]
                       .as<std::string>();
        tx.commit();
    }
    auto r = run_command({bin_path("crawl_worker").string(), "--crawl-id", crawl_id, "--database-url", db.url(),
                          "--data-dir", (dir / "data").string(), "--log-format", format});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err;
}

} // namespace

TEST_CASE("ops: --log-format json lines of a crawl worker carry its process row id and the crawl id", "[ops]")
{
    ScratchDatabase db;
    ScratchDir dir("orch-jsonlog-");
    std::string crawl_id;
    const auto err = cancelled_crawl_worker_log(db, dir, "json", crawl_id);
    auto conn = db.connect();
    pqxx::read_transaction tx(*conn);
    auto self_id = tx.exec1("SELECT id FROM process WHERE process_type = 'worker'")[0].as<std::string>();
    std::istringstream lines(err);
    int n = 0;
    bool sealed = false;
    for (std::string line; std::getline(lines, line); ++n) {
        INFO(line);
        auto j = nlohmann::json::parse(line);
        CHECK(j["program"] == "crawl_worker");
        CHECK(j["crawl"] == crawl_id);
        CHECK(j["self"] == self_id);
        sealed = sealed || (j["msg"] == "crawl sealed" && j["outcome"] == "cancelled");
    }
    CHECK(n >= 2);
    CHECK(sealed);
}

TEST_CASE("ops: a text log line names each field once - a field given with the message replaces the context's", "[ops]")
{
    ScratchDatabase db;
    ScratchDir dir("orch-textlog-");
    std::string crawl_id;
    const auto err = cancelled_crawl_worker_log(db, dir, "text", crawl_id);
    std::istringstream lines(err);
    int n = 0;
    bool ready = false;
    for (std::string line; std::getline(lines, line); ++n) {
        INFO(line);
        for (const std::string key : {" self=", " crawl="}) {
            std::size_t count = 0;
            for (auto at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
                ++count;
            }
            CHECK(count <= 1);
        }
        // The supervisor's own line gives `self` as a field as well as the context does.
        ready = ready || line.find("supervisor ready") != std::string::npos;
    }
    CHECK(n >= 2);
    CHECK(ready);
}
