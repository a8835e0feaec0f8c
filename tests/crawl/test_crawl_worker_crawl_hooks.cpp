// crawl_worker and its crawl-level hooks under stress: a background hook that
// ends early, stops (cancel, timeout, SIGTERM) while a Crawl hook runs, and
// CrawlEnd hooks after an early stop.

#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

using namespace orch::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// A Crawl hook that says it runs, then sleeps 30 s (its timeout is 60 s).
void write_slow_crawl_hook(CrawlFixture& f, const std::filesystem::path& running)
{
    f.write_config("setup", R"({"timeout": 60})");
    f.write_hook("setup", "on_Crawl__10_setup.sh", "touch '" + running.string() + "'\nsleep 30 &\nwait\n");
}

} // namespace

TEST_CASE("crawl_worker: a background crawl hook that ends early leaves no child behind", "[crawl_worker][crawl_hooks]")
{
    CrawlFixture f;
    auto child_pid = f.root / "child.pid";
    f.write_hook("daemon", "on_Crawl__10_daemon.bg.sh",
                 "sleep 300 &\necho $! > '" + child_pid.string() + "'\nexit 0\n");
    f.write_hook("save", "on_Snapshot__10_save.sh", "sleep 0.5\n" + succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto p = f.run(id);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "succeeded");
    auto pid = std::stoi(read_text(child_pid));
    CHECK(poll_until([&] { return !process_alive(pid); }, 10s));
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: cancellation is noticed while a Crawl hook runs", "[crawl_worker][crawl_hooks]")
{
    CrawlFixture f;
    auto running = f.root / "running";
    write_slow_crawl_hook(f, running);
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto q = f.quote(id);
    auto p = f.start(id);
    REQUIRE(poll_until([&] { return std::filesystem::exists(running); }, 20s));
    auto t0 = Clock::now();
    f.exec("UPDATE crawl SET cancel_requested_at = now() WHERE id = " + q);
    REQUIRE(p->wait_for(40s));
    INFO(p->output());
    CHECK(seconds_since(t0) < 8.0);
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT status || '/' || outcome FROM crawl WHERE id = " + q) == "sealed/cancelled");
    CHECK(f.count("SELECT count(*) FROM archive_result") == 0);
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: the crawl timeout applies while a Crawl hook runs", "[crawl_worker][crawl_hooks]")
{
    CrawlFixture f;
    auto running = f.root / "running";
    write_slow_crawl_hook(f, running);
    f.write_hook("save", "on_Snapshot__10_save.sh", succeeded_record("saved"));
    auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "2"});
    auto t0 = Clock::now();
    auto p = f.run(id, {}, 40s);
    INFO(p->output());
    CHECK(seconds_since(t0) < 10.0);
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "timed_out");
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: SIGTERM while a Crawl hook runs exits 10 at once", "[crawl_worker][crawl_hooks]")
{
    CrawlFixture f;
    auto running = f.root / "running";
    write_slow_crawl_hook(f, running);
    auto id = f.add_crawl(CrawlFixture::site_urls(2));
    auto p = f.start(id);
    REQUIRE(poll_until([&] { return std::filesystem::exists(running); }, 20s));
    auto t0 = Clock::now();
    p->signal(SIGTERM);
    REQUIRE(p->wait_for(30s));
    INFO(p->output());
    CHECK(seconds_since(t0) < 8.0);
    CHECK(p->exit_code() == 10);
    CHECK(f.rows("SELECT status, lease_owner FROM crawl WHERE id = " + f.quote(id)) ==
          std::vector<std::vector<std::string>>{{"started", ""}});
    CHECK(f.count("SELECT count(*) FROM process WHERE status <> 'exited'") == 0);
    CHECK(f.wait_no_leftovers().empty());
}

TEST_CASE("crawl_worker: CrawlEnd hooks after a timeout run without the worker spinning", "[crawl_worker][crawl_hooks]")
{
    CrawlFixture f;
    auto started = f.root / "started";
    auto terms = f.root / "terms";
    auto ticks = f.root / "ticks";
    f.write_hook("slow", "on_Snapshot__10_slow.sh", slow_hook(started, terms) + succeeded_record("late"));
    // CPU ticks (utime + stime) the crawl worker (our parent) spends while this hook sleeps 2 s.
    f.write_hook("end", "on_CrawlEnd__10_end.sh",
                 "cpu() { local s; s=$(< /proc/$PPID/stat); s=${s##*) }; set -- $s; echo $(( ${12} + ${13} )); }\n"
                 "a=$(cpu); sleep 2; b=$(cpu); echo $(( b - a )) > '" + ticks.string() + "'\n");
    auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "2"});
    auto p = f.run(id, {}, 40s);
    INFO(p->output());
    CHECK(p->exit_code() == 0);
    CHECK(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "timed_out");
    auto spent = read_text(ticks);
    REQUIRE(!spent.empty());
    CHECK(std::stol(spent) < 40); // 2 s of busy polling would be ~200 ticks
    CHECK(f.wait_no_leftovers().empty());
}
