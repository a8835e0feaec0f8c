// The daemon's metrics (orchestrator/orchestrator_metrics.hpp) after a known
// amount of work: the counters equal what was run, however often they were
// scraped meanwhile, and a later scrape adds nothing.
#include "common/base/fd.hpp"
#include "tests/ops/http_exchange.hpp"
#include "tests/ops/prom_parser.hpp"
#include "tests/orchestrator/orch_fixture.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <sstream>
#include <thread>

using namespace orch;
using namespace orch::test;

namespace {

// The body of a successful GET /metrics.
std::string scrape_body(std::uint16_t port)
{
    const auto out = scrape_metrics(port);
    REQUIRE(out.rfind("HTTP/1.1 200 OK", 0) == 0);
    return out.substr(out.find("\r\n\r\n") + 4);
}

// Every sample of a scrape as "name{l1="v1",...}" -> value, labels in name order.
std::map<std::string, double> samples(const std::string& body)
{
    std::map<std::string, double> out;
    for (const auto& [family_name, family] : parse_prometheus(body)) {
        for (const auto& s : family.samples) {
            std::string key = s.name + "{";
            bool first = true;
            for (const auto& [k, v] : s.labels) {
                key += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, v);
                first = false;
            }
            out[key + "}"] = s.value;
        }
    }
    return out;
}

} // namespace

TEST_CASE("metrics: after 2 crawls of 3 URLs with 2 hooks each the daemon's counters equal the work done - and "
          "repeated scrapes count nothing twice",
          "[ops][metrics]")
{
    OrchFixture f;
    f.write_hook("good", "on_Snapshot__10_good.sh",
                 "sleep 0.05\necho '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"good\"}'");
    f.write_hook("bad", "on_Snapshot__20_bad.sh", "echo boom >&2\nexit 1");
    constexpr int k_crawls = 2;
    constexpr int k_urls = 3;
    constexpr int k_hooks = 2;
    // One snapshot per snapshot worker: the number of workers is known too.
    auto daemon = f.start({"--daemon", "--metrics-listen", "127.0.0.1:0", "--log-format", "json", "--poll-interval",
                           "1"},
                          "machine-metrics", std::nullopt,
                          {{"MAX_SNAPSHOT_WORKERS", "1"}, {"SNAPSHOT_WORKER_MAX_SNAPSHOTS", "1"},
                           {"SNAPSHOT_WORKER_BATCH", "1"}});
    REQUIRE(f.wait_registered(daemon->pid()));
    int port = 0;
    REQUIRE(eventually([&] { return (port = metrics_port_in_log(daemon->err())) != 0; }, std::chrono::seconds(10)));
    const auto before = samples(scrape_body(static_cast<std::uint16_t>(port)));
    for (int c = 0; c < k_crawls; ++c) {
        f.add_crawl(OrchFixture::site_urls(k_urls, fmt::format("http://site{}.test/", c)));
    }

    // Scraped about every 300 ms while the work runs and for the 10 s lag after
    // it (below): each scrape adds the window since the last one.
    std::vector<std::map<std::string, double>> during;
    auto done = [&] {
        return f.count("SELECT count(*) FROM crawl WHERE status = 'sealed'") == k_crawls &&
               f.count("SELECT count(*) FROM process WHERE status <> 'exited' AND process_type <> 'orchestrator'") == 0;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!done()) {
        INFO(describe(*daemon));
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        during.push_back(samples(scrape_body(static_cast<std::uint16_t>(port))));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    // What the database says happened, to read the figures below against.
    INFO(f.scalar("SELECT string_agg(type || ' ' || outcome || ' ' || n, ', ') FROM (SELECT type, outcome, "
                  "count(*)::text n FROM ops.process_exits WHERE machine_id = 'machine-metrics' GROUP BY 1, 2) t"));
    // Past the lag after the last end, every exit and event is in the window.
    // Scraping goes on through that lag, so the counters are seen to climb
    // window by window however fast the work itself was.
    REQUIRE(eventually(
        [&] {
            during.push_back(samples(scrape_body(static_cast<std::uint16_t>(port))));
            std::this_thread::sleep_for(std::chrono::milliseconds(300)); // as while the work ran
            return f.scalar("SELECT now() > max(ended_at) + interval '11 seconds' FROM process WHERE machine_id = "
                            "'machine-metrics' AND status = 'exited'") == "t";
        },
        std::chrono::seconds(30)));
    auto first = samples(scrape_body(static_cast<std::uint16_t>(port)));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto second = samples(scrape_body(static_cast<std::uint16_t>(port)));

    const int snapshots = k_crawls * k_urls;
    const int hooks = snapshots * k_hooks;
    const std::map<std::string, double> expected{
        {"orchestrator_process_spawns_total{type=\"crawl_worker\"}", k_crawls},
        {"orchestrator_process_spawns_total{type=\"snapshot_worker\"}", snapshots},
        {"orchestrator_process_spawns_total{type=\"hook\"}", hooks},
        {"orchestrator_process_exits_total{outcome=\"ok\",type=\"crawl_worker\"}", k_crawls},
        {"orchestrator_process_exits_total{outcome=\"ok\",type=\"snapshot_worker\"}", snapshots},
        {"orchestrator_process_exits_total{outcome=\"ok\",type=\"hook\"}", snapshots},     // good
        {"orchestrator_process_exits_total{outcome=\"failed\",type=\"hook\"}", snapshots}, // bad
        {"orchestrator_process_duration_seconds_count{type=\"hook\"}", hooks},
        {"orchestrator_process_duration_seconds_count{type=\"crawl_worker\"}", k_crawls},
        {"orchestrator_events_total{kind=\"crawl.started\"}", k_crawls},
        {"orchestrator_events_total{kind=\"crawl.sealed\"}", k_crawls},
        {"orchestrator_processes{state=\"running\",type=\"orchestrator\"}", 1},
        {"orchestrator_processes{state=\"running\",type=\"crawl_worker\"}", 0},
        {"orchestrator_processes{state=\"running\",type=\"hook\"}", 0},
        {"orchestrator_db_errors_total{component=\"metrics\"}", 0},
    };
    MEASURE("metrics: " << during.size() << " scrapes while " << k_crawls << " crawls ran");
    CHECK(during.size() >= 3);
    for (const auto& [key, value] : expected) {
        INFO(key);
        const bool counter = key.find("_total") != std::string::npos || key.find("_count") != std::string::npos;
        // Nothing was counted before the work began.
        if (counter && key.find("db_errors") == std::string::npos) {
            CHECK((before.count(key) == 0 ? 0.0 : before.at(key)) == 0.0);
        }
        REQUIRE(first.count(key) == 1);
        CHECK(first.at(key) == value);
        REQUIRE(second.count(key) == 1);
        CHECK(second.at(key) == value);
        // A counter never went down, nor past its final value, between scrapes.
        if (counter) {
            double last = 0;
            for (const auto& s : during) {
                const double now = s.count(key) == 0 ? 0.0 : s.at(key);
                CHECK(now >= last);
                CHECK(now <= value);
                last = now;
            }
        }
    }
    // Exits of the processes it did not run: none (no other outcome appeared).
    for (const auto& [key, value] : second) {
        if (key.rfind("orchestrator_process_exits_total{", 0) == 0 && value != 0) {
            INFO(key);
            CHECK(expected.count(key) == 1);
        }
    }
    // A later scrape is the same for every counter: nothing counted twice across scrapes.
    for (const auto& [key, value] : first) {
        if (key.find("_total{") != std::string::npos || key.find("_bucket{") != std::string::npos ||
            key.find("_count{") != std::string::npos) {
            INFO(key);
            CHECK(second.at(key) == value);
        }
    }

    daemon->signal(SIGTERM);
    REQUIRE(daemon->wait_for(std::chrono::seconds(30)));
    INFO(describe(*daemon));
    CHECK(daemon->exit_code() == 0);
}
