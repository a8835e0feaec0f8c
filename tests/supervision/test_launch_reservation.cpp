// Supervisor::reserve: the rows of launches to come, written by one statement;
// launch() then starts each without a statement of its own.
#include "tests/supervision/supervision_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>


using namespace orch;
using namespace orch::test;
using namespace std::chrono_literals;


TEST_CASE("reserved rows: one statement writes them all - a launch writes none - its leaf and identity come with "
          "its exit - the rest close as not_started",
          "[supervisor][reserve]")
{
    SupervisionFixture fx;
    const bool fallback = GENERATE(false, true);
    auto options = fx.options(fallback);
    options.exit_write_delay = 1h; // only the explicit write below records the exits
    Supervisor sup(*fx.conn, options);
    std::vector<LaunchRequest> requests{fx.request({"sh", "-c", "exit 3"}, "first"),
                                        fx.request({"sleep", "30"}, "second"), fx.request({"true"}, "never")};
    requests[1].row_id = "00000000-0000-4000-8000-0000000000aa"; // a given id is kept
    sup.reserve(requests);
    CHECK(requests[1].row_id == "00000000-0000-4000-8000-0000000000aa");
    std::set<std::string> ids;
    for (const auto& r : requests) {
        REQUIRE_FALSE(r.row_id.empty());
        ids.insert(r.row_id);
        CHECK(fx.column(r.row_id, "status") == "queued");
        CHECK(fx.column(r.row_id, "parent_id") == sup.self_row_id());
        CHECK_FALSE(fx.column(r.row_id, "cookie").empty());
        CHECK(fx.column(r.row_id, "cgroup_path").empty()); // chosen at launch
        CHECK(fx.column(r.row_id, "(cmd->>0)") == r.argv.front());
        CHECK(fx.column(r.row_id, "stdout_path") ==
              (r.log_dir / (r.name + "." + r.row_id + ".stdout.log")).string());
        // One transaction wrote them all.
        CHECK(fx.column(r.row_id, "xmin::text") == fx.column(requests[0].row_id, "xmin::text"));
    }
    CHECK(ids.size() == 3);

    const auto written = fx.column(requests[0].row_id, "xmin::text");
    const auto first = sup.launch(requests[0]);
    REQUIRE(first.started());
    CHECK(first.row_id == requests[0].row_id);
    CHECK(fx.column(first.row_id, "xmin::text") == written); // no statement of its own
    REQUIRE(until_finished(sup, first.row_id));

    const auto second = sup.launch(requests[1]);
    REQUIRE(second.started());
    // The process carries the cookie its row records: recovery can find it by that.
    // Eventually: launch() may return while the child is still inside execve, whose
    // new environment /proc shows only once the kernel has set it up.
    const auto cookie = fx.column(second.row_id, "cookie");
    CHECK(eventually([&] {
        const auto pids = pids_with_cookie(cookie);
        return std::find(pids.begin(), pids.end(), second.pid) != pids.end();
    }));
    // Its running write (deferred for a hook) records the leaf it was born in.
    REQUIRE(eventually([&] {
        sup.process_events();
        return fx.column(second.row_id, "status") == "running";
    }));
    CHECK(fx.column(second.row_id, "pid") == std::to_string(second.pid));
    CHECK(fx.column(second.row_id, "cgroup_path").empty() == fallback);

    sup.release_reservations();
    sup.write_held_exits();
    CHECK(fx.column(first.row_id, "status") == "exited");
    CHECK(fx.column(first.row_id, "exit_code") == "3");
    CHECK(fx.column(first.row_id, "end_reason") == "exited");
    CHECK(fx.column(first.row_id, "pid") == std::to_string(first.pid));
    CHECK(fx.column(first.row_id, "cgroup_path").empty() == fallback);
    const auto never = requests[2].row_id;
    CHECK(fx.column(never, "status") == "exited");
    CHECK(fx.column(never, "end_reason") == "not_started");
    CHECK(fx.column(never, "pid").empty());
    CHECK(fx.column(never, "exit_code").empty());
    CHECK_FALSE(fx.column(never, "ended_at").empty());
    sup.teardown({}, 2s);
    CHECK(fx.column(second.row_id, "status") == "exited");
}

TEST_CASE("a reserved launch that cannot start closes its row as spawn_failed - before or at its spawn",
          "[supervisor][reserve]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(false));
    std::vector<LaunchRequest> requests{fx.request({"true"}, "no-dir"), fx.request({"/nonexistent/program"}, "no-exe")};
    // A file where the log directory should be: the launch throws before its spawn.
    std::ofstream(fx.dir / "blocker") << "";
    requests[0].log_dir = fx.dir / "blocker" / "logs";
    sup.reserve(requests);
    CHECK_THROWS(sup.launch(requests[0]));
    sup.write_held_exits();
    CHECK(fx.column(requests[0].row_id, "status") == "exited");
    CHECK(fx.column(requests[0].row_id, "end_reason") == "spawn_failed");

    const auto failed = sup.launch(requests[1]);
    CHECK_FALSE(failed.started());
    CHECK(fx.column(requests[1].row_id, "status") == "exited");
    CHECK(fx.column(requests[1].row_id, "end_reason") == "spawn_failed");
    pqxx::work tx(*fx.conn);
    CHECK(tx.exec1("SELECT count(*) FROM process WHERE status <> 'exited' AND process_type = 'hook'")[0].as<int>() == 0);
}
