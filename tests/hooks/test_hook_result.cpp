#include "common/hooks/hook_result.hpp"

#include <catch2/catch.hpp>

#include <csignal>

using namespace orch;

namespace {

HookOutput with_record(std::string status, std::optional<std::string> error = std::nullopt)
{
    HookOutput out;
    ArchiveResultRecord r;
    r.status = std::move(status);
    r.error = std::move(error);
    r.output_str = "out";
    r.output_json = {{"k", 1}};
    out.archive_result = r;
    out.archive_result_count = 1;
    return out;
}

} // namespace

TEST_CASE("hooks: status names round-trip", "[hooks][result]")
{
    for (auto s : {HookStatus::succeeded, HookStatus::failed, HookStatus::skipped, HookStatus::noresults}) {
        CHECK(parse_hook_status(to_string(s)) == s);
    }
    CHECK_FALSE(parse_hook_status("success"));
}

TEST_CASE("hooks: no record: the exit code decides", "[hooks][result]")
{
    HookOutput none;
    CHECK(decide_hook_result(none, HookEnd::exited(0)).status == HookStatus::noresults);
    CHECK_FALSE(decide_hook_result(none, HookEnd::exited(0)).error);
    CHECK(decide_hook_result(none, HookEnd::exited(10)).status == HookStatus::skipped);
    HookResult r = decide_hook_result(none, HookEnd::exited(3));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("exited with code 3"));
    r = decide_hook_result(none, HookEnd::signalled(SIGKILL));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("killed by signal 9"));
}

TEST_CASE("hooks: a record with exit 0 is taken as is", "[hooks][result]")
{
    for (const char* s : {"succeeded", "failed", "skipped", "noresults"}) {
        HookResult r = decide_hook_result(with_record(s), HookEnd::exited(0));
        CHECK(to_string(r.status) == s);
        CHECK(r.output_str == std::optional<std::string>("out"));
        CHECK(r.output_json == nlohmann::json{{"k", 1}});
    }
    CHECK(decide_hook_result(with_record("failed", "no network"), HookEnd::exited(0)).error ==
          std::optional<std::string>("no network"));
}

TEST_CASE("hooks: a record that disagrees with a failing exit fails - mentioning the exit", "[hooks][result]")
{
    HookResult r = decide_hook_result(with_record("succeeded"), HookEnd::exited(3));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("hook reported succeeded but exited with code 3"));
    CHECK(r.output_str == std::optional<std::string>("out"));  // kept for the user to inspect

    r = decide_hook_result(with_record("skipped", "no curl"), HookEnd::signalled(SIGSEGV));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("no curl; hook reported skipped but killed by signal 11"));

    // The default plugins report failed and exit 1: the record's error stands alone.
    r = decide_hook_result(with_record("failed", "boom"), HookEnd::exited(1));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("boom"));
    r = decide_hook_result(with_record("failed"), HookEnd::exited(2));
    CHECK(r.error == std::optional<std::string>("hook reported failed and exited with code 2"));

    CHECK(decide_hook_result(with_record("skipped"), HookEnd::exited(10)).status == HookStatus::skipped);
    CHECK(decide_hook_result(with_record("succeeded"), HookEnd::exited(10)).status == HookStatus::failed);
}

TEST_CASE("hooks: output contract violations fail the result", "[hooks][result]")
{
    HookOutput out = with_record("succeeded");
    out.errors = {"hook printed 2 ArchiveResult records (lines 1, 3)"};
    HookResult r = decide_hook_result(out, HookEnd::exited(0));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("hook printed 2 ArchiveResult records (lines 1, 3)"));

    out.errors.push_back("line 9: invalid JSON in record: x");
    out.errors_dropped = 3;
    CHECK(decide_hook_result(out, HookEnd::exited(0)).error ==
          std::optional<std::string>("hook printed 2 ArchiveResult records (lines 1, 3) (and 4 more problems)"));
}

TEST_CASE("hooks: timeouts and start failures", "[hooks][result]")
{
    HookEnd end = HookEnd::signalled(SIGTERM);
    end.timed_out_after = std::chrono::seconds(30);
    HookResult r = decide_hook_result(with_record("succeeded"), end);
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("timed out after 30 s"));
    end.timed_out_after = std::chrono::milliseconds(1500);
    CHECK(decide_hook_result(HookOutput{}, end).error == std::optional<std::string>("timed out after 1.500 s"));

    r = decide_hook_result(HookOutput{}, HookEnd::not_started("cannot execute node: No such file or directory"));
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("cannot execute node: No such file or directory"));
}

TEST_CASE("hooks: background hooks stopped by teardown with SIGTERM count as exit 0", "[hooks][result]")
{
    HookEnd end = HookEnd::signalled(SIGTERM);
    end.torn_down = true;
    CHECK(decide_hook_result(HookOutput{}, end).status == HookStatus::noresults);
    CHECK(decide_hook_result(with_record("succeeded"), end).status == HookStatus::succeeded);
    end = HookEnd::exited(143);
    end.torn_down = true;
    CHECK(decide_hook_result(HookOutput{}, end).status == HookStatus::noresults);

    end = HookEnd::signalled(SIGKILL);
    end.torn_down = true;
    HookResult r = decide_hook_result(HookOutput{}, end);
    CHECK(r.status == HookStatus::failed);
    CHECK(r.error == std::optional<std::string>("killed by signal 9 during teardown"));
    // SIGTERM outside teardown is an ordinary failure.
    CHECK(decide_hook_result(HookOutput{}, HookEnd::signalled(SIGTERM)).status == HookStatus::failed);
}
