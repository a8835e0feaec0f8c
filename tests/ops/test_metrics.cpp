#include "tests/ops/http_exchange.hpp"
#include "common/base/errors.hpp"
#include "orchestrator/metrics.hpp"
#include "orchestrator/metrics_server.hpp"
#include "tests/ops/prom_parser.hpp"
#include "tests/support/command_runner.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace orch;
using namespace orch::test;

namespace {

std::shared_ptr<metrics::Registry> sample_registry()
{
    auto registry = std::make_shared<metrics::Registry>();
    auto& r = *registry;
    r.describe("t_requests_total", metrics::Type::counter, "Requests.\nSecond line with \\ backslash.");
    r.describe("t_temperature", metrics::Type::gauge, "A gauge.");
    r.describe("t_duration_seconds", metrics::Type::histogram, "Durations.", {0.5, 1, 5});
    r.add("t_requests_total", {{"path", "a\"b\\c\nd"}}, 3);
    r.add("t_requests_total", {{"path", "/"}});
    r.set("t_temperature", {}, -1.5);
    for (double v : {0.1, 0.5, 0.7, 3.0, 100.0}) {
        r.observe("t_duration_seconds", {{"type", "hook"}}, v);
    }
    return registry;
}

// One HTTP exchange with the server on 127.0.0.1:port; returns everything it sent.
std::string http(std::uint16_t port, const std::string& request)
{
    auto out = http_exchange(port, request);
    REQUIRE_FALSE(out.empty());
    return out;
}

} // namespace

TEST_CASE("metrics: the registry renders strict Prometheus text (HELP/TYPE - escaping - cumulative buckets)", "[ops][metrics]")
{
    auto registry = sample_registry();
    auto& r = *registry;
    auto text = r.render();
    INFO(text);
    auto families = parse_prometheus(text);
    REQUIRE(families.size() == 3);
    CHECK(families["t_requests_total"].type == "counter");
    CHECK(families["t_requests_total"].help == "Requests.\\nSecond line with \\\\ backslash.");
    auto& counter = families["t_requests_total"].samples;
    REQUIRE(counter.size() == 2);
    CHECK(counter[1].labels["path"] == "a\"b\\c\nd"); // round-trips through escaping
    CHECK(counter[1].value == 3);
    CHECK(text.find("t_temperature -1.5\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_bucket{type=\"hook\",le=\"0.5\"} 2\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_bucket{type=\"hook\",le=\"1\"} 3\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_bucket{type=\"hook\",le=\"5\"} 4\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_bucket{type=\"hook\",le=\"+Inf\"} 5\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_sum{type=\"hook\"} 104.3\n") != std::string::npos);
    CHECK(text.find("t_duration_seconds_count{type=\"hook\"} 5\n") != std::string::npos);

    CHECK_THROWS(r.add("t_requests_total", {}, -1));
    CHECK_THROWS(r.add("t_undeclared", {}));
    CHECK_THROWS(r.set("t_requests_total", {}, 1));
    CHECK_THROWS(r.add("t_requests_total", {{"bad-label", "x"}}));
    CHECK_THROWS(r.observe("t_duration_seconds", {{"le", "1"}}, 1));
    CHECK_THROWS(r.describe("0bad", metrics::Type::gauge, "x"));
    CHECK_THROWS(r.describe("t_h", metrics::Type::histogram, "x", {1, 1}));
    CHECK(metrics::format_value(1e20) == "1e+20");
}

TEST_CASE("metrics: the parser used by these tests rejects malformed exposition", "[ops][metrics]")
{
    CHECK_THROWS(parse_prometheus("x 1\n"));                                   // no HELP/TYPE
    CHECK_THROWS(parse_prometheus("# HELP x h\n# TYPE x gauge\nx{a=\"\\q\"} 1\n")); // bad escape
    CHECK_THROWS(parse_prometheus("# HELP x h\n# TYPE x gauge\nx 1\nx 2\n"));  // duplicate series
    CHECK_THROWS(parse_prometheus("# HELP x h\n# TYPE x histogram\nx_bucket{le=\"1\"} 2\nx_count 2\n")); // no +Inf
    CHECK_NOTHROW(parse_prometheus("# HELP x h\n# TYPE x gauge\nx{a=\"b\"} 1\n"));
}

TEST_CASE("metrics: the HTTP server answers GET /metrics only - closes - and bounds requests", "[ops][metrics]")
{
    auto registry = sample_registry();
    MetricsServer server("127.0.0.1:0", [registry] { return registry->render(); });
    REQUIRE(server.port() != 0);
    auto ok = http(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    REQUIRE(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(ok.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != std::string::npos);
    CHECK(ok.find("Connection: close\r\n") != std::string::npos);
    auto body = ok.substr(ok.find("\r\n\r\n") + 4);
    CHECK(ok.find(fmt::format("Content-Length: {}\r\n", body.size())) != std::string::npos);
    CHECK_NOTHROW(parse_prometheus(body));
    CHECK(http(server.port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
    auto head = http(server.port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
    CHECK(head.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(head.substr(head.find("\r\n\r\n") + 4).empty());
    CHECK(http(server.port(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
    auto post = http(server.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    CHECK(post.rfind("HTTP/1.1 405", 0) == 0);
    CHECK(post.find("Allow: GET, HEAD") != std::string::npos);
    CHECK(http(server.port(), "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
    auto big = http(server.port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n");
    CHECK(big.rfind("HTTP/1.1 431", 0) == 0);
    // Still serving after all that.
    CHECK(http(server.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);

    CHECK_THROWS_AS(MetricsServer("nowhere", [] { return std::string(); }), orch::Error);
    CHECK_THROWS_AS(MetricsServer("127.0.0.1:99999", [] { return std::string(); }), orch::Error);
    CHECK_THROWS_AS(MetricsServer("127.0.0.1:" + std::to_string(server.port()), [] { return std::string(); }),
                    std::system_error);
}

// promtool comes with Debian's `prometheus` package (scripts/debian-packages.txt):
// the exposition is checked by Prometheus's own linter, not by our reading of it.
TEST_CASE("metrics: promtool check metrics accepts the registry's output", "[metrics][promtool]")
{
    REQUIRE(run_command({"/bin/sh", "-c", "command -v promtool"}).exit_code == 0);
    ScratchDir dir("orch-prom-");
    auto file = dir / "metrics.txt";
    std::ofstream(file) << sample_registry()->render();
    auto r = run_command({"/bin/sh", "-c", "promtool check metrics < " + file.string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
}
