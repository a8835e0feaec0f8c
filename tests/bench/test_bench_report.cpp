// The benchmarks' report code (tests/bench/bench_report.hpp, teardown_report.hpp):
// a row whose sample is empty or void prints "NO: <why>", never "yes".
#include "tests/bench/bench_report.hpp"
#include "tests/bench/teardown_report.hpp"

#include <catch2/catch.hpp>

using namespace orch::bench;

namespace {

// The <met?> field of a ROW line.
std::string met_of(const std::string& line)
{
    std::vector<std::string> fields;
    std::string::size_type from = 0;
    for (auto tab = line.find('\t'); tab != std::string::npos; tab = line.find('\t', from)) {
        fields.push_back(line.substr(from, tab - from));
        from = tab + 1;
    }
    fields.push_back(line.substr(from));
    REQUIRE(fields.size() == 8);
    return fields[6];
}

// A sound run of `n` trees, each gone `late_ms` after its deadline.
TeardownRun sound_run(int n, double late_ms)
{
    TeardownRun run;
    run.launched = n;
    for (int i = 0; i < n; ++i) {
        TornDownTree t;
        t.id = "tree-" + std::to_string(i);
        t.deadline_ms = 2000 + 20.0 * i;
        t.teardown_began_ms = 1500 - i; // launched one after another, a ms apart
        t.gone_ms = t.deadline_ms + late_ms;
        run.trees.push_back(t);
    }
    run.total_ms = run.trees.back().deadline_ms - run.trees.back().teardown_began_ms + late_ms;
    return run;
}

} // namespace

TEST_CASE("bench report: a percentile of an empty sample is no data - not 0", "[bench_report]")
{
    CHECK_FALSE(quantile({}, 0.99).has_value());
    CHECK_FALSE(median({}).has_value());
    CHECK(fixed(quantile({}, 0.99)) == "no data");
    REQUIRE(quantile({3, 1, 2}, 0.5).has_value());
    CHECK(*quantile({3, 1, 2}, 0.5) == 2);
    CHECK_THROWS_AS(value_of(median({}), "rounds"), std::logic_error);
}

TEST_CASE("bench report: a goal row on an empty sample prints NO: no data", "[bench_report]")
{
    const auto verdict = judge(quantile({}, 0.99), {}, [](double v) { return v <= 50; });
    CHECK(verdict.kind == Verdict::void_measurement);
    const auto line = format_row({"5 x", "no data", "-", "-", "p99 <= 50 ms", verdict, "a window"});
    CHECK(met_of(line) == "NO: no data");
    CHECK(line.find("\tyes") == std::string::npos);
}

TEST_CASE("bench report: a defect voids a row whose figure meets the goal", "[bench_report]")
{
    const auto verdict = judge(1.0, {"1 tree survived SIGKILL"}, [](double v) { return v <= 50; });
    CHECK(verdict.text() == "NO: 1 tree survived SIGKILL");
    CHECK(judge(1.0, {}, [](double v) { return v <= 50; }).text() == "yes");
    CHECK(judge(60.0, {}, [](double v) { return v <= 50; }).text() == "NO");
}

TEST_CASE("bench report: a context row has no verdict and every row names its window", "[bench_report]")
{
    const auto line = format_row({"2 context", "1", "2", "0.50", "ignored", std::nullopt, "wall clock"});
    CHECK(line == "ROW\t2 context\t1\t2\t0.50\t-\t-\twall clock\n");
}

TEST_CASE("bench report: row 5 of a sound teardown can pass", "[bench_report]")
{
    const auto rows = teardown_rows(sound_run(50, 5));
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].verdict->text() == "yes");
    CHECK(rows[1].verdict->text() == "yes");
    CHECK(rows[0].window.find("50 of 50 trees") != std::string::npos);
}

TEST_CASE("bench report: row 5 with no tree measured cannot print yes", "[bench_report]")
{
    SECTION("no outcomes at all")
    {
        TeardownRun run;
        run.launched = 50;
        run.total_ms = 3;
        for (const auto& row : teardown_rows(run)) {
            INFO(format_row(row));
            CHECK(row.verdict->kind == Verdict::void_measurement);
            CHECK(met_of(format_row(row)).rfind("NO: ", 0) == 0);
        }
        CHECK(teardown_rows(run)[0].ours == "no data");
    }
    SECTION("every deadline passed before the teardown began")
    {
        auto run = sound_run(50, 0);
        for (auto& t : run.trees) {
            t.teardown_began_ms = t.deadline_ms + 1;
        }
        CHECK(late_after_deadline_ms(run).empty());
        for (const auto& row : teardown_rows(run)) {
            INFO(format_row(row));
            CHECK(row.verdict->kind == Verdict::void_measurement);
            CHECK(row.verdict->why.find("50 trees past deadline before teardown") != std::string::npos);
        }
    }
}

TEST_CASE("bench report: row 5 with a survivor of SIGKILL or an unpopulated tree cannot print yes", "[bench_report]")
{
    auto run = sound_run(50, 5);
    SECTION("a survivor")
    {
        run.trees[7].survived_kill = true;
        for (const auto& row : teardown_rows(run)) {
            INFO(format_row(row));
            CHECK(row.verdict->text() == "NO: 1 tree survived SIGKILL");
        }
    }
    SECTION("a tree not fully started")
    {
        run.trees[3].populated = false;
        for (const auto& row : teardown_rows(run)) {
            CHECK(row.verdict->text() == "NO: 1 tree not fully started");
        }
    }
    SECTION("a tree missing from the outcomes")
    {
        run.trees.pop_back();
        for (const auto& row : teardown_rows(run)) {
            CHECK(row.verdict->text() == "NO: 1 tree launched but not in the outcomes");
        }
    }
}
