// `orchestrator snapshots` and `orchestrator report`, and the ops views they
// read, over the known tree of ops_fixture.hpp.

#include "tests/ops/ops_fixture.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

using namespace orch::test;
using namespace orch::test::ops_ids;

namespace {

// c1's snapshots as the tree has them, plus a b.test page whose wget failed
// like s2's, one failed with another error and one sealed failed by its crawl
// worker (no failed result); capture results reporting status codes and MIME
// types, one through the visit plugin, which wins over the others.
void add_report_rows(const OpsTree& tree)
{
    tree.exec("INSERT INTO snapshot (id, crawl_id, url, status, outcome, error, sealed_at) VALUES"
              " ('00000000-0000-4000-8000-0000000000f1', '" + c1 + "', 'http://B.test/x', 'sealed', 'failed',"
              "  '1 of 2 hooks failed', now()),"
              " ('00000000-0000-4000-8000-0000000000f2', '" + c1 + "', 'http://b.test/y', 'sealed', 'failed',"
              "  'gave up after 3 worker deaths', now())");
    tree.exec("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status, error, output_json, end_ts) VALUES"
              " ('00000000-0000-4000-8000-0000000000f1', 'wget', 'on_Snapshot__50_wget', 'failed', E'boom\\nat line 2',"
              "  '{\"status\": 404}', now()),"
              " ('00000000-0000-4000-8000-0000000000f1', 'pdf', 'on_Snapshot__60_pdf', 'failed', 'no browser',"
              "  NULL, now())");
    tree.exec("UPDATE archive_result SET output_json = '{\"status\": \"200\", \"mime_type\": \"Text/HTML; charset=utf-8\"}'"
              " WHERE snapshot_id = '" + s1 + "' AND plugin = 'wget'");
    tree.exec("UPDATE archive_result SET output_json = '{\"status\": 500}' WHERE snapshot_id = '" + s1 +
              "' AND plugin = 'title'");
    tree.exec("INSERT INTO archive_result (snapshot_id, plugin, hook_name, status, output_json) VALUES"
              " ('" + s2 + "', 'visit', 'on_Snapshot__20_visit.py', 'succeeded', '{\"status\": 301}')");
}

} // namespace

TEST_CASE("ops: snapshots lists a crawl's snapshots in creation order - filtered by state and host", "[ops][archive]")
{
    OpsTree tree;
    add_report_rows(tree);
    auto json = tree.run({"snapshots", c1, "--json"});
    INFO(json.out << json.err);
    REQUIRE(json.exit_code == 0);
    auto lines = lines_of(json.out);
    REQUIRE(lines.size() == 5);
    std::vector<std::string> ids;
    for (const auto& line : lines) {
        auto row = nlohmann::json::parse(line);
        ids.push_back(row["id"].get<std::string>());
        CHECK(row["dir"] == "snapshots/" + row["id"].get<std::string>());
    }
    // One statement inserted s1..s3 (one creation time: the id orders them), then f1, f2.
    CHECK(ids == std::vector<std::string>{s1, s2, s3, "00000000-0000-4000-8000-0000000000f1",
                                          "00000000-0000-4000-8000-0000000000f2"});
    auto first = nlohmann::json::parse(lines[0]);
    CHECK(first["url"] == "http://a.test/");
    CHECK(first["host"] == "a.test");
    CHECK(first["status"] == "sealed");
    CHECK(first["outcome"] == "succeeded");

    auto failed_b = tree.run({"snapshots", c1, "--json", "--status", "failed", "--host", "B.TEST"});
    REQUIRE(failed_b.exit_code == 0);
    CHECK(lines_of(failed_b.out).size() == 2);
    auto started = tree.run({"snapshots", c1, "--json", "--status", "started", "--status", "succeeded"});
    CHECK(lines_of(started.out).size() == 2);
    CHECK(lines_of(tree.run({"snapshots", c1, "--json", "--limit", "2"}).out).size() == 2);

    auto text = tree.run({"snapshots", c1, "--text"});
    INFO(text.out);
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("URL") == 0);
    CHECK(text.out.find("http://a.test/2  " + s2 + "  failed") != std::string::npos);
    CHECK(text.out.find("snapshots/" + s3) != std::string::npos);
    CHECK(tree.run({"snapshots", c1, "--text", "--host", "nowhere.test"}).out == "no snapshots match\n");

    // Bad input: the exit codes of `show`.
    CHECK(tree.run({"snapshots", "00000000-0000-4000-8000-00000000dead"}).exit_code == 6);
    CHECK(tree.run({"snapshots", "not-a-uuid"}).exit_code == 7);
    CHECK(tree.run({"snapshots", c1, "--status", "bogus"}).exit_code == 2);
}

TEST_CASE("ops: report gives hosts - status codes - MIME types and failures by plugin and reason", "[ops][archive]")
{
    OpsTree tree;
    add_report_rows(tree);
    auto r = tree.run({"report", c1, "--json"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto report = nlohmann::json::parse(r.out);
    CHECK(report["crawl"]["id"] == c1);
    CHECK(report["crawl"]["snapshots"]["total"] == 5);

    const auto summary = [](const nlohmann::json& rows, const std::vector<const char*>& keys) {
        std::string out;
        for (const auto& row : rows) {
            std::string line;
            for (const char* key : keys) {
                line += (line.empty() ? "" : " ") + (row[key].is_string() ? row[key].get<std::string>()
                                                                           : row[key].dump());
            }
            out += (out.empty() ? "" : "; ") + line;
        }
        return out;
    };
    // Most failures first: b.test's two, then a.test (3 snapshots, s2 failed, s3 running).
    CHECK(summary(report["hosts"], {"host", "snapshots", "succeeded", "failures", "unsealed"}) ==
          "b.test 2 0 2 0; a.test 3 1 1 1");
    // One code per page: s1's title hook (500) before its wget ("200"), the first
    // by hook name, no visit result being there; s2's visit 301; f1's wget 404.
    CHECK(summary(report["status_codes"], {"status_code", "pages"}) == "301 1; 404 1; 500 1");
    CHECK(summary(report["mime_types"], {"mime_type", "pages"}) == "text/html 1");
    CHECK(summary(report["failures"], {"plugin", "reason", "results", "snapshots"}) ==
          "wget boom 2 2; null gave up after 3 worker deaths 1 1; pdf no browser 1 1");
    CHECK(report["failures"][0]["example_url"] == "http://B.test/x");

    auto top = nlohmann::json::parse(tree.run({"report", c1, "--json", "--top", "1"}).out);
    CHECK(top["failures"].size() == 1);
    CHECK(top["hosts"].size() == 1);

    auto text = tree.run({"report", c1});
    INFO(text.out);
    REQUIRE(text.exit_code == 0);
    for (const char* heading : {"Hosts", "HTTP status codes", "MIME types", "Failures by plugin and reason"}) {
        CHECK(text.out.find(heading) != std::string::npos);
    }
    CHECK(text.out.find("gave up after 3 worker deaths") != std::string::npos);
    // A crawl with nothing to report says so per section.
    auto empty = tree.run({"report", c2});
    CHECK(empty.exit_code == 0);
    CHECK(empty.out.find("none") != std::string::npos);

    CHECK(tree.run({"report", "00000000-0000-4000-8000-00000000dead"}).exit_code == 6);
    CHECK(tree.run({"report", "nope"}).exit_code == 7);
    CHECK(tree.run({"report", c1, "--top", "0"}).exit_code == 2);
}

TEST_CASE("ops: the listing and report views are read by the reader role", "[ops][archive]")
{
    const std::string role = fmt::format("ops_reader_archive_t{}", ::getpid());
    struct DropRole {
        std::string name;
        ~DropRole()
        {
            try {
                pqxx::connection admin(base_database_url());
                pqxx::nontransaction tx(admin);
                tx.exec0("DROP ROLE IF EXISTS " + tx.quote_name(name));
            } catch (const std::exception& e) {
                std::fprintf(stderr, "warning: could not drop role %s: %s\n", name.c_str(), e.what());
            }
        }
    } drop{role};
    OpsTree tree; // destroyed first
    add_report_rows(tree);
    REQUIRE(tree.run({"ops", "create-reader-role", "--role-name", role}).exit_code == 0);
    pqxx::connection reader(tree.db().url() + " user=" + role);
    pqxx::nontransaction tx(reader);
    const auto q = tx.quote(c1);
    CHECK(tx.exec1("SELECT count(*) FROM ops.crawl_snapshots WHERE crawl_id = " + q)[0].as<int>() == 5);
    CHECK(tx.exec1("SELECT sum(failures) FROM ops.crawl_report_hosts WHERE crawl_id = " + q)[0].as<int>() == 3);
    CHECK(tx.exec1("SELECT sum(pages) FROM ops.crawl_report_status_codes WHERE crawl_id = " + q)[0].as<int>() == 3);
    CHECK(tx.exec1("SELECT mime_type FROM ops.crawl_report_mime_types WHERE crawl_id = " + q)[0].as<std::string>() ==
          "text/html");
    CHECK(tx.exec1("SELECT sum(results) FROM ops.crawl_report_failures WHERE crawl_id = " + q)[0].as<int>() == 4);
    // The tables themselves stay closed to it.
    CHECK_THROWS_AS(tx.exec("SELECT * FROM archive_result"), pqxx::insufficient_privilege);
}
