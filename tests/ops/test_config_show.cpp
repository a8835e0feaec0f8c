// `orchestrator config show`: every value in effect with its source, secrets
// masked, and every invalid one named (exit 3) after the whole report.
#include "tests/ops/ops_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

using namespace orch::test;

namespace {

// name -> the JSON line `config show --json` printed for it.
std::map<std::string, nlohmann::json> by_name(const std::string& out)
{
    std::map<std::string, nlohmann::json> rows;
    for (const auto& line : lines_of(out)) {
        auto j = nlohmann::json::parse(line);
        rows[j.at("name").get<std::string>()] = j;
    }
    return rows;
}

struct ConfigFixture {
    ScratchDir dir{"config-show"};
    std::filesystem::path plugins = dir.path() / "plugins";

    ConfigFixture()
    {
        std::filesystem::create_directories(plugins / "grab");
        std::ofstream(plugins / "grab" / "on_Snapshot__10_grab.sh") << "#!/bin/sh\nexit 0\n";
        std::filesystem::permissions(plugins / "grab" / "on_Snapshot__10_grab.sh", std::filesystem::perms::owner_all);
        std::ofstream(plugins / "grab" / "config.json") << R"({"timeout": 5, "depth": 2, "user_agent": "x"})";
    }

    CommandResult show(std::vector<std::string> args, std::map<std::string, std::string> env) const
    {
        std::vector<std::string> argv{bin_path("orchestrator").string(), "config", "show", "--json",
                                      "--data-dir", (dir.path() / "data").string()};
        argv.insert(argv.end(), args.begin(), args.end());
        // Unset what the test environment may carry, then the case's own.
        std::map<std::string, std::string> full{{"ORCH_BUILTIN_PLUGINS_DIR", ""}, {"PLUGINS_DIR", plugins.string()},
                                                {"DATABASE_URL", ""},             {"LEASE_TTL", ""},
                                                {"MAX_SNAPSHOT_WORKERS", ""},     {"HOOK_PARALLELISM", ""},
                                                {"PLUGINS", ""},                  {"ORCH_CONTAINMENT", ""}};
        for (auto& [k, v] : env) {
            full[k] = v;
        }
        return run_command(argv, full);
    }
};

} // namespace

TEST_CASE("ops: config show gives each value in effect and its source from the command line - the environment - config.json "
          "or the default - and masks the database password",
          "[ops][config]")
{
    ConfigFixture f;
    auto r = f.show({"--max-snapshot-workers", "3"},
                    {{"LEASE_TTL", "45"},
                     {"MAX_CRAWL_WORKERS", "2"},
                     {"GRAB_DEPTH", "7"},
                     {"DATABASE_URL", "postgresql://archiver:hunter2@db.example:5433/archive"}});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto rows = by_name(r.out);
    auto value_source = [&](const std::string& name) {
        REQUIRE(rows.count(name) == 1);
        return rows[name].at("value").get<std::string>() + " / " + rows[name].at("source").get<std::string>();
    };
    CHECK(value_source("--max-snapshot-workers") == "3 / command line");
    CHECK(value_source("--max-crawl-workers") == "2 / environment");
    CHECK(value_source("--stop-grace") == "60 / default");
    CHECK(value_source("LEASE_TTL") == "45 / environment");
    CHECK(value_source("TEARDOWN_GRACE") == "10 / default");
    CHECK(value_source("HOOK_LOG_MAX_BYTES") == "67108864 / default");
    CHECK(value_source("GRAB_DEPTH") == "7 / environment");
    CHECK(value_source("GRAB_TIMEOUT") == "5 / config.json");
    CHECK(value_source("GRAB_REQUIRED") == "false / default");
    CHECK(rows["GRAB_DEPTH"].at("plugin_dir").get<std::string>().find("grab") != std::string::npos);
    // The connection string is shown, its password never.
    CHECK(r.out.find("hunter2") == std::string::npos);
    CHECK(value_source("--database-url").find("host=db.example") != std::string::npos);
    CHECK(value_source("--database-url").find("password=<redacted>") != std::string::npos);
    CHECK(value_source("--data-dir") == (f.dir.path() / "data").string() + " / command line");
    // Reads no database and creates nothing.
    CHECK_FALSE(std::filesystem::exists(f.dir.path() / "data"));

    // The same in the table for a person.
    std::vector<std::string> argv{bin_path("orchestrator").string(), "config", "show"};
    auto text = run_command(argv, {{"ORCH_BUILTIN_PLUGINS_DIR", ""}, {"PLUGINS_DIR", f.plugins.string()},
                                   {"LEASE_TTL", "45"}});
    INFO(text.out);
    CHECK(text.exit_code == 0);
    CHECK(text.out.find("LEASE_TTL ") != std::string::npos);
    CHECK(text.out.find("GRAB_DEPTH ") != std::string::npos);
}

TEST_CASE("ops: config show names every invalid value and exits 3 - after listing everything", "[ops][config]")
{
    ConfigFixture f;
    auto r = f.show({}, {{"HOOK_PARALLELISM", "0"}, {"ORCH_CONTAINMENT", "fallbak"}, {"GRAB_TIMEOUT", "soon"}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 3);
    auto rows = by_name(r.out);
    CHECK(rows.count("LEASE_TTL") == 1);
    CHECK(rows.count("--max-crawl-workers") == 1);
    REQUIRE(rows.count("HOOK_PARALLELISM") == 1);
    CHECK(rows["HOOK_PARALLELISM"].at("error").get<std::string>().find("from 1 to 64, got '0'") != std::string::npos);
    REQUIRE(rows.count("ORCH_CONTAINMENT") == 1);
    CHECK(rows["ORCH_CONTAINMENT"].contains("error"));
    REQUIRE(rows.count("grab") == 1);
    CHECK(rows["grab"].at("error").get<std::string>().find("GRAB_TIMEOUT") != std::string::npos);
    CHECK(r.err.find("HOOK_PARALLELISM") != std::string::npos);
    CHECK(r.err.find("ORCH_CONTAINMENT") != std::string::npos);
    CHECK(r.err.find("GRAB_TIMEOUT") != std::string::npos);
}

TEST_CASE("ops: a PLUGINS allow-list naming no plugin here is invalid (3) - a typo would disable every plugin",
          "[ops][config]")
{
    ConfigFixture f;
    auto r = f.show({}, {{"PLUGINS", "grab, grabb"}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 3);
    auto rows = by_name(r.out);
    REQUIRE(rows.count("PLUGINS") == 1);
    CHECK(rows["PLUGINS"].at("error").get<std::string>() == "PLUGINS lists grabb that no plugin directory has");
    CHECK(r.err.find("grabb") != std::string::npos);
    // Every listed name known: valid, and an unlisted plugin is off.
    auto ok = f.show({}, {{"PLUGINS", " grab ,"}});
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
}

TEST_CASE("ops: config show marks a METRICS_LISTEN the orchestrator would refuse", "[ops][config]")
{
    ConfigFixture f;
    auto r = f.show({}, {{"METRICS_LISTEN", "1.2.3.4:99999"}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 3);
    auto rows = by_name(r.out);
    REQUIRE(rows.count("--metrics-listen") == 1);
    CHECK(rows["--metrics-listen"].at("error").get<std::string>().find("1.2.3.4:99999") != std::string::npos);
    CHECK(f.show({}, {{"METRICS_LISTEN", "127.0.0.1:9464"}}).exit_code == 0);
}
