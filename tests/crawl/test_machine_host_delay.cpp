// The machine's default host delay (DEFAULT_HOST_DELAY_MS, common/work/host_rules.hpp)
// end to end: the real crawl_worker and snapshot_workers, the delay read by the
// snapshot workers' claims, measured from the hooks' own clocks.

#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <sstream>

using namespace orch::test;

namespace {

// A hook that appends "<host> <start time>" (bash's $EPOCHREALTIME) to `starts` and stays 0.05 s.
void write_start_logging_hook(CrawlFixture& f, const std::filesystem::path& starts)
{
    f.write_hook("stamp", "on_Snapshot__10_stamp.sh",
                 "host=$(printf '%s' \"$url\" | sed -E 's|^[a-z]+://([^/:]+).*|\\1|')\n"
                 "echo \"$host $EPOCHREALTIME\" >> '" + starts.string() + "'\n"
                 "sleep 0.05\n" + succeeded_record("stamp"));
}

// Gaps between consecutive hook starts of each host, from the hooks' log.
std::map<std::string, std::vector<double>> start_gaps(const std::filesystem::path& starts)
{
    std::map<std::string, std::vector<double>> times;
    for (const auto& line : read_lines(starts)) {
        std::istringstream fields(line);
        std::string host;
        double at = 0;
        REQUIRE(fields >> host >> at);
        times[host].push_back(at);
    }
    std::map<std::string, std::vector<double>> gaps;
    for (auto& [host, at] : times) {
        std::sort(at.begin(), at.end());
        for (std::size_t i = 1; i < at.size(); ++i) {
            gaps[host].push_back(at[i] - at[i - 1]);
        }
    }
    return gaps;
}

// The same from the snapshot rows' claim times (the delay's own clock).
std::vector<double> claim_gaps(CrawlFixture& f, const std::string& crawl, const std::string& host)
{
    std::vector<double> gaps;
    for (const auto& row : f.rows("SELECT extract(epoch FROM started_at - lag(started_at) OVER (ORDER BY started_at)) "
                                  "FROM snapshot WHERE crawl_id = " + f.quote(crawl) + " AND url LIKE 'http://" +
                                  host + "/%' ORDER BY started_at")) {
        if (!row[0].empty()) {
            gaps.push_back(std::stod(row[0]));
        }
    }
    return gaps;
}

std::string join(const std::vector<double>& v)
{
    std::ostringstream out;
    for (double x : v) {
        out << x << ' ';
    }
    return out.str();
}

double mean(const std::vector<double>& v)
{
    double total = 0;
    for (double x : v) {
        total += x;
    }
    return v.empty() ? 0 : total / static_cast<double>(v.size());
}

// 4 URLs of a.test, then 2 of b.test.
std::vector<std::string> urls()
{
    return {"http://a.test/1", "http://a.test/2", "http://a.test/3", "http://a.test/4", "http://b.test/1",
            "http://b.test/2"};
}

} // namespace

TEST_CASE("crawl_worker: DEFAULT_HOST_DELAY_MS spaces the hook starts on one host of a crawl without --host-delay - "
          "a crawl's own --host-delay wins",
          "[crawl_worker][host_rules]")
{
    CrawlFixture f;
    const auto starts = f.root / "starts";
    write_start_logging_hook(f, starts);
    // 4 workers for 6 snapshots: without a delay the 4 of a.test would start together.
    const CrawlEnv machine{{"MAX_SNAPSHOT_WORKERS", "4"}, {"DEFAULT_HOST_DELAY_MS", "1000"}};

    auto plain = f.add_crawl(urls());
    CHECK(f.scalar("SELECT host_delay_s IS NULL FROM crawl WHERE id = " + f.quote(plain)) == "t");
    {
        auto p = f.run(plain, machine);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
    }
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(plain)) == "succeeded");
    {
        auto gaps = start_gaps(starts);
        INFO("hook start gaps a.test: " << join(gaps["a.test"]) << "b.test: " << join(gaps["b.test"]));
        REQUIRE(gaps["a.test"].size() == 3);
        REQUIRE(gaps["b.test"].size() == 1);
        // The claims are 1 s apart to the millisecond; a hook starts a fork and an
        // exec after its claim, which may differ by a little from one to the next.
        for (const auto& host : {"a.test", "b.test"}) {
            for (double gap : gaps[host]) {
                CHECK(gap >= 0.9);
            }
            for (double gap : claim_gaps(f, plain, host)) {
                CHECK(gap >= 0.999);
            }
        }
    }

    // The crawl's own 0.2 s wins over the machine's 1 s: the same measure sees
    // starts closer together than the machine's delay.
    std::filesystem::remove(starts);
    auto own = f.add_crawl(urls(), {"--host-delay", "0.2"});
    {
        auto p = f.run(own, machine);
        INFO(p->output());
        CHECK(p->exit_code() == 0);
    }
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(own)) == "succeeded");
    {
        auto gaps = start_gaps(starts);
        INFO("hook start gaps a.test: " << join(gaps["a.test"]));
        REQUIRE(gaps["a.test"].size() == 3);
        CHECK(mean(gaps["a.test"]) < 0.6);
        const auto claims = claim_gaps(f, own, "a.test");
        INFO("claim gaps a.test: " << join(claims));
        REQUIRE(claims.size() == 3);
        for (double gap : claims) {
            CHECK(gap >= 0.199);
        }
        CHECK(mean(claims) < 0.6);
    }
    CHECK(f.wait_no_leftovers().empty());
}
