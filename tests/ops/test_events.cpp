// The event journal: operator actions and a crawl's life, as `orchestrator
// events` and ops.events show them.
#include "tests/ops/ops_fixture.hpp"

#include "common/db/event_journal.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

using namespace orch::test;

namespace {

struct JournalFixture {
    ScratchDatabase db;
    ScratchDir dir{"events"};
    std::filesystem::path plugins = dir.path() / "plugins";

    JournalFixture()
    {
        std::filesystem::create_directories(plugins / "save");
        std::filesystem::create_directories(dir.path() / "no-builtins");
        auto hook = plugins / "save" / "on_Snapshot__10_save.sh";
        std::ofstream(hook) << "#!/bin/sh\necho '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'\n";
        std::filesystem::permissions(hook, std::filesystem::perms::owner_all);
    }

    CommandResult run(std::vector<std::string> args) const
    {
        std::vector<std::string> argv{bin_path("orchestrator").string()};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--database-url", db.url(), "--data-dir", (dir.path() / "data").string(),
                                 "--machine-id", "events-test", "--log-level", "warn"});
        // Only our plugin: the built-in directory is an empty one.
        return run_command(argv, {{"ORCH_BUILTIN_PLUGINS_DIR", (dir.path() / "no-builtins").string()},
                                  {"PLUGINS_DIR", plugins.string()}});
    }

    std::string ok(std::vector<std::string> args) const
    {
        auto r = run(args);
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        return r.out;
    }

    // `events --json ARGS`, parsed.
    std::vector<nlohmann::json> events(std::vector<std::string> args = {}) const
    {
        args.insert(args.begin(), {"events", "--json"});
        std::vector<nlohmann::json> out;
        for (const auto& line : lines_of(ok(args))) {
            out.push_back(nlohmann::json::parse(line));
        }
        return out;
    }
};

std::vector<std::string> kinds(const std::vector<nlohmann::json>& events)
{
    std::vector<std::string> out;
    for (const auto& e : events) {
        out.push_back(e.at("kind").get<std::string>());
    }
    return out;
}

// A new crawl row (nothing else), for the record_event_with_change cases; its id.
std::string insert_crawl(pqxx::connection& conn)
{
    return pqxx::nontransaction(conn)
        .exec1("INSERT INTO crawl (urls) VALUES ('{http://a.test/}') RETURNING id")[0]
        .as<std::string>();
}

} // namespace

TEST_CASE("ops: the event journal records operator actions and a crawl's life - events filters them", "[ops][events]")
{
    JournalFixture f;
    auto first = f.ok({"add", "http://a.test/1", "--label", "journal"});
    first = first.substr(0, first.find('\n'));
    f.ok({"--idle-window", "0"});
    auto second = f.ok({"add", "http://a.test/2"});
    second = second.substr(0, second.find('\n'));
    f.ok({"cancel", second});
    f.ok({"retry", second});
    f.ok({"prune", "--older-than", "1d"});

    auto all = f.events();
    CHECK(kinds(all) == std::vector<std::string>{"crawl.added", "orchestrator.started", "crawl.started",
                                                 "crawl.sealed", "orchestrator.stopped", "crawl.added",
                                                 "crawl.cancelled", "crawl.retried", "process.pruned"});
    REQUIRE(all.size() == 9);
    // Who: the acting program, its OS user, its process row when it has one.
    CHECK(all[0].at("actor") == "cli");
    CHECK(all[0].at("machine_id") == "events-test");
    CHECK(all[0].at("crawl_id") == first);
    CHECK(all[0].at("detail").at("urls") == 1);
    CHECK(all[0].at("detail").at("label") == "journal");
    CHECK_FALSE(all[0].at("os_user").is_null());
    CHECK(all[1].at("actor") == "orchestrator");
    CHECK(all[1].at("machine_id") == "events-test");
    CHECK_FALSE(all[1].at("process_id").is_null());
    CHECK(all[2].at("actor") == "crawl_worker");
    CHECK(all[3].at("detail").at("outcome") == "succeeded");
    CHECK(all[3].at("detail").at("snapshots") == 1);
    CHECK(all[4].at("detail").at("exit_code") == 0);
    CHECK(all[4].at("process_id") == all[1].at("process_id"));
    CHECK(all[6].at("crawl_id") == second);
    CHECK(all[8].at("detail").at("older_than") == "1 days");
    // Newest last, ids increasing.
    for (std::size_t i = 1; i < all.size(); ++i) {
        CHECK(all[i].at("id").get<long>() > all[i - 1].at("id").get<long>());
    }

    CHECK(kinds(f.events({"--crawl-id", second})) ==
          std::vector<std::string>{"crawl.added", "crawl.cancelled", "crawl.retried"});
    CHECK(kinds(f.events({"--kind", "crawl.sealed"})) == std::vector<std::string>{"crawl.sealed"});
    CHECK(kinds(f.events({"--kind", "orchestrator", "--kind", "process.pruned"})) ==
          std::vector<std::string>{"orchestrator.started", "orchestrator.stopped", "process.pruned"});
    CHECK(kinds(f.events({"-n", "2"})) == std::vector<std::string>{"crawl.retried", "process.pruned"});
    CHECK(f.events({"--since", "1h"}).size() == 9);
    // A kind or noun no program writes is a typo: refused, not an empty answer.
    auto typo = f.run({"events", "--kind", "crawl.seald"});
    CHECK(typo.exit_code == 7);
    CHECK(typo.err.find("no such event kind") != std::string::npos);
    CHECK(f.run({"events", "--kind", "bogus"}).exit_code == 7);
    // Every kind in the journal is one the list knows.
    for (const auto& k : kinds(f.events())) {
        INFO(k);
        CHECK(std::find_if(std::begin(orch::k_event_kinds), std::end(orch::k_event_kinds),
                           [&](const char* known) { return k == known; }) != std::end(orch::k_event_kinds));
    }

    auto text = f.run({"events", "--text"});
    INFO(text.out);
    CHECK(text.exit_code == 0);
    CHECK(text.out.find("crawl.cancelled") != std::string::npos);
    CHECK(text.out.find("cancelled by operator") != std::string::npos);

    // `show crawl` ends with the crawl's own journal.
    auto shown = f.run({"show", "crawl", second});
    INFO(shown.out);
    CHECK(shown.exit_code == 0);
    CHECK(shown.out.find("crawl.cancelled") != std::string::npos);
    CHECK(shown.out.find("cli (") != std::string::npos);
    auto shown_json = nlohmann::json::parse(f.ok({"show", "crawl", second, "--json"}));
    CHECK(kinds(shown_json.at("events").get<std::vector<nlohmann::json>>()) ==
          std::vector<std::string>{"crawl.added", "crawl.cancelled", "crawl.retried"});

    CHECK(f.run({"events", "--crawl-id", "nope"}).exit_code == 7);
    CHECK(f.run({"events", "--since", "yesterday"}).exit_code == 7);
}

TEST_CASE("ops: an event recorded with its change is written once per changed row - in the change's commit",
          "[ops][events]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    const auto crawl = insert_crawl(*conn);
    auto scalar = [&](const std::string& sql) {
        return pqxx::nontransaction(*conn).exec_params1(sql, crawl)[0].as<std::string>();
    };
    // Changes the label from $3 (NULL: none yet) to $2: the same call again changes nothing.
    const std::string relabel =
        "UPDATE crawl SET label = $2 WHERE id = $1::uuid AND label IS NOT DISTINCT FROM $3 RETURNING 1";
    orch::Event e{"crawl.paused", "crawl labelled x", crawl};
    e.detail = {{"label", "x"}};
    const std::vector<std::optional<std::string>> params{crawl, std::string("x"), std::nullopt};

    CHECK(orch::record_event_with_change(*conn, "test.relabel", relabel, params, "cli", e) == 1);
    CHECK(scalar("SELECT label FROM crawl WHERE id = $1") == "x");
    CHECK(scalar("SELECT count(*) FROM event WHERE crawl_id = $1") == "1");
    CHECK(scalar("SELECT kind || ' ' || actor || ' ' || message || ' ' || (detail->>'label') FROM event "
                 "WHERE crawl_id = $1") == "crawl.paused cli crawl labelled x x");
    // Written by the change's own transaction.
    CHECK(scalar("SELECT (e.xmin::text = c.xmin::text)::text FROM event e JOIN crawl c ON c.id = e.crawl_id "
                 "WHERE c.id = $1") == "true");

    // No change, no event.
    CHECK(orch::record_event_with_change(*conn, "test.relabel", relabel, params, "cli", e) == 0);
    CHECK(scalar("SELECT count(*) FROM event WHERE crawl_id = $1") == "1");

    // A change that fails takes its event with it.
    CHECK_THROWS_AS(orch::record_event_with_change(*conn, "test.depth",
                                                   "UPDATE crawl SET max_depth = $2::int WHERE id = $1::uuid RETURNING 1",
                                                   {crawl, std::string("-1")}, "cli", e),
                    pqxx::sql_error);
    CHECK(scalar("SELECT count(*) FROM event WHERE crawl_id = $1") == "1");
    CHECK(scalar("SELECT max_depth FROM crawl WHERE id = $1") == "0");
}

TEST_CASE("ops: an event recorded with its change can say what the change found - in its message and detail",
          "[ops][events]")
{
    ScratchDatabase db;
    auto conn = db.connect();
    const auto crawl = insert_crawl(*conn);
    orch::ChangeStatement relabel;
    relabel.name = "test.relabel_found";
    // What the row held before: a CTE of the same statement, read in its snapshot.
    relabel.ctes = "before AS (SELECT label AS old FROM crawl WHERE id = $1::uuid), ";
    relabel.change = "UPDATE crawl SET label = $2 FROM before WHERE id = $1::uuid RETURNING before.old, crawl.label";
    relabel.message = "CASE WHEN change.old IS NULL THEN 'labelled ' || change.label END";
    relabel.detail = "jsonb_build_object('from', change.old, 'to', change.label)";
    relabel.returning = "message || ' | ' || (detail->>'by')";
    orch::Event e{"crawl.paused", "crawl relabelled", crawl};
    e.detail = {{"by", "test"}, {"to", "overwritten"}};

    auto first = orch::record_event_with_change(*conn, relabel, {crawl, std::string("x")}, "cli", e);
    REQUIRE(first.size() == 1);
    CHECK(first[0][0].as<std::string>() == "labelled x | test");
    // Not found (old is no longer NULL): the event's own message.
    auto second = orch::record_event_with_change(*conn, relabel, {crawl, std::string("y")}, "cli", e);
    REQUIRE(second.size() == 1);
    CHECK(second[0][0].as<std::string>() == "crawl relabelled | test");
    auto details = pqxx::nontransaction(*conn).exec_params(
        "SELECT detail->>'from', detail->>'to', detail->>'by' FROM event WHERE crawl_id = $1 ORDER BY id", crawl);
    REQUIRE(details.size() == 2);
    CHECK(details[0][0].is_null());
    CHECK(details[0][1].as<std::string>() == "x");
    CHECK(details[1][0].as<std::string>() == "x");
    CHECK(details[1][1].as<std::string>() == "y");
    CHECK(details[1][2].as<std::string>() == "test");
    // Nothing changed, nothing written: no rows back.
    relabel.name = "test.relabel_if_new";
    relabel.change = "UPDATE crawl SET label = $2 FROM before WHERE id = $1::uuid AND label IS DISTINCT FROM $2 "
                     "RETURNING before.old, crawl.label";
    CHECK(orch::record_event_with_change(*conn, relabel, {crawl, std::string("y")}, "cli", e).empty());
    CHECK(pqxx::nontransaction(*conn).exec_params1("SELECT count(*) FROM event WHERE crawl_id = $1", crawl)[0].as<int>() ==
          2);
}
