// The archive read without the database: each snapshot's index.json and the
// crawl's index.json and index.html, written at the seals by the real workers,
// then read by scripts that know only docs/archive-layout.md.

#include "tests/crawl/crawl_fixture.hpp"
#include "tests/crawl/hook_scripts.hpp"
#include "tests/support/command_runner.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <set>

using namespace orch::test;

namespace {

// A capture stand-in: a screenshot, a WARC under a name that needs escaping in
// a URL, a title with markup; /3 fails.
std::string capture_hook()
{
    return "printf 'PNG-of-%s' \"$url\" > screenshot.png\n"
           "mkdir -p warc && printf 'WARC' > 'warc/a b#1.warc.gz'\n"
           "echo '{\"type\":\"Snapshot\",\"title\":\"<script>alert(1)</script> & <b>bold</b> of '\"${url##*/}\"'\"}'\n"
           "case $url in */3) echo '{\"type\":\"ArchiveResult\",\"status\":\"failed\",\"error\":\"HTTP 500\"}'; exit 1;; esac\n" +
           succeeded_record("captured");
}

} // namespace

TEST_CASE("archive index: index.json per snapshot and index.json and index.html per crawl after the seals",
          "[crawl_worker][archive]")
{
    CrawlFixture f;
    f.write_hook("cap", "on_Snapshot__10_cap.sh", capture_hook());
    const auto urls = CrawlFixture::site_urls(3);
    auto id = f.add_crawl(urls, {"--label", "index <test>", "--config",
                                 R"({"CAP_API_TOKEN": "hunter2", "CAP_PROXY": "http://user:s3cret@proxy.test:3128/"})"});
    auto p = f.run(id);
    INFO(p->output());
    REQUIRE(p->exit_code() == 0);
    REQUIRE(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "partial");

    // Each snapshot's index.json states what the database says.
    for (const auto& row : f.rows("SELECT id, url, outcome, attempts, sealed_at IS NOT NULL FROM snapshot"
                                  " WHERE crawl_id = " + f.quote(id))) {
        const auto dir = f.data / "snapshots" / row[0];
        INFO(row[1]);
        auto doc = nlohmann::json::parse(read_text(dir / "index.json"));
        CHECK(doc["format"] == 1);
        CHECK(doc["id"] == row[0]);
        CHECK(doc["crawl_id"] == id);
        CHECK(doc["url"] == row[1]);
        CHECK(doc["status"] == "sealed");
        CHECK(doc["outcome"] == row[2]);
        CHECK(std::to_string(doc["attempt"].get<int>()) == row[3]);
        CHECK(doc["title"] == "<script>alert(1)</script> & <b>bold</b> of " + row[1].substr(row[1].rfind('/') + 1));
        CHECK(doc["parent"].is_null());
        CHECK(doc["sealed_at"].get<std::string>().back() == 'Z');
        REQUIRE(doc["hooks"].size() == 1);
        const auto& hook = doc["hooks"][0];
        CHECK(hook["plugin"] == "cap");
        CHECK(hook["status"] == (row[1].back() == '3' ? "failed" : "succeeded"));
        CHECK(hook["error"] == (row[1].back() == '3' ? nlohmann::json("HTTP 500") : nlohmann::json()));
        std::set<std::string> files;
        for (const auto& file : hook["output_files"]) {
            files.insert(file["path"].get<std::string>() + " " + file["size"].dump());
        }
        CHECK(files == std::set<std::string>{"screenshot.png " + std::to_string(4 + 3 + row[1].size()),
                                             "warc/a b#1.warc.gz 4"});
        // No temporary file left beside it.
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
        }
    }

    // The crawl's: no secret, every snapshot.
    const auto crawl_dir = f.data / "crawls" / id;
    const auto crawl_json = read_text(crawl_dir / "index.json");
    const auto crawl_html = read_text(crawl_dir / "index.html");
    for (const auto* text : {&crawl_json, &crawl_html}) {
        CHECK(text->find("hunter2") == std::string::npos);
        CHECK(text->find("s3cret") == std::string::npos);
        CHECK(text->find(f.db.url()) == std::string::npos);
    }
    auto crawl = nlohmann::json::parse(crawl_json);
    CHECK(crawl["crawl"]["config"]["CAP_API_TOKEN"] == "[redacted]");
    CHECK(crawl["crawl"]["config"]["CAP_PROXY"] == "[redacted]");
    CHECK(crawl["crawl"]["counts"]["succeeded"] == 2);
    CHECK(crawl["crawl"]["counts"]["failed"] == 1);
    CHECK(crawl["snapshots"].size() == 3);
    CHECK(crawl_html.find("<script>alert") == std::string::npos);

    // Read by a script that knows only the documented layout.
    auto checked = run_command({"/usr/bin/env", "python3", (source_dir() / "tests/crawl/check_archive_index.py").string(),
                                f.data.string(), id});
    INFO(checked.out << checked.err);
    CHECK(checked.exit_code == 0);
    CHECK(checked.out == "ok: 3 snapshots\n");

    // index.html in Chromium from file://: one row per page, the markup of the
    // titles shown as text, links that resolve to the files.
    auto shown = run_command({"/usr/bin/env", "python3", (source_dir() / "tests/crawl/read_index_html.py").string(),
                              (crawl_dir / "index.html").string()});
    INFO(shown.out << shown.err);
    REQUIRE(shown.exit_code == 0);
    auto page = nlohmann::json::parse(shown.out);
    CHECK(page["scripts"] == 0);
    CHECK(page["title_elements"] == 0);
    REQUIRE(page["rows"].size() == 3);
    std::set<std::string> listed;
    for (const auto& cells : page["rows"]) {
        REQUIRE(cells.size() == 6);
        const auto url = cells[2].get<std::string>();
        listed.insert(url);
        CHECK(cells[1] == "<script>alert(1)</script> & <b>bold</b> of " + url.substr(url.rfind('/') + 1));
        CHECK(cells[3] == (url.back() == '3' ? "failed" : "succeeded"));
        CHECK(cells[5].get<std::string>().find("cap/screenshot.png") != std::string::npos);
    }
    CHECK(listed == std::set<std::string>(urls.begin(), urls.end()));
    int resolved = 0;
    for (const auto& link : page["links"]) {
        auto href = link[1].get<std::string>();
        REQUIRE(href.rfind("file://", 0) == 0);
        std::string path;
        for (std::size_t i = 7; i < href.size(); ++i) {
            if (href[i] == '%' && i + 2 < href.size()) {
                path += static_cast<char>(std::stoi(href.substr(i + 1, 2), nullptr, 16));
                i += 2;
            } else {
                path += href[i];
            }
        }
        INFO(href);
        CHECK(std::filesystem::is_regular_file(path));
        ++resolved;
    }
    CHECK(resolved == 9); // screenshot, WARC and index.json of each page
}

TEST_CASE("archive index: a crawl's index lists snapshots past many cursor pages - in creation order",
          "[crawl_worker][archive]")
{
    CrawlFixture f;
    f.write_hook("cap", "on_Snapshot__10_cap.sh", capture_hook());
    auto id = f.add_crawl({"http://site.test/seed"});
    // 1,800 pages sealed already (several cursor pages of 500), created after the seed.
    f.exec("INSERT INTO snapshot (crawl_id, url, status, outcome, sealed_at, title, created_at)"
           " SELECT " + f.quote(id) + ", 'http://site.test/p' || g, 'sealed', 'succeeded', now(), 'Page <' || g || '>',"
           " now() + make_interval(secs => g) FROM generate_series(1, 1800) g");
    auto p = f.run(id);
    INFO(p->output());
    REQUIRE(p->exit_code() == 0);
    const auto crawl_dir = f.data / "crawls" / id;
    auto crawl = nlohmann::json::parse(read_text(crawl_dir / "index.json"));
    REQUIRE(crawl["snapshots"].size() == 1801);
    CHECK(crawl["crawl"]["counts"]["total"] == 1801);
    CHECK(crawl["snapshots"][0]["url"] == "http://site.test/seed");
    CHECK(crawl["snapshots"][1800]["url"] == "http://site.test/p1800");
    CHECK(crawl["snapshots"][1800]["title"] == "Page <1800>");
    const auto html = read_text(crawl_dir / "index.html");
    std::size_t rows = 0;
    for (auto at = html.find("<tr class="); at != std::string::npos; at = html.find("<tr class=", at + 1)) {
        ++rows;
    }
    CHECK(rows == 1801);
    CHECK(html.find("Page &lt;1800&gt;") != std::string::npos);
}

TEST_CASE("archive index: snapshots the crawl worker sealed at a timeout get their index.json too",
          "[crawl_worker][archive]")
{
    CrawlFixture f;
    f.write_hook("slow", "on_Snapshot__10_slow.sh", "sleep 30\n");
    auto id = f.add_crawl(CrawlFixture::site_urls(2), {"--timeout", "1"});
    auto p = f.run(id);
    INFO(p->output());
    REQUIRE(p->exit_code() == 0);
    REQUIRE(f.scalar("SELECT outcome FROM crawl WHERE id = " + f.quote(id)) == "timed_out");
    for (const auto& row : f.rows("SELECT id, outcome FROM snapshot WHERE crawl_id = " + f.quote(id))) {
        INFO(row[0]);
        auto doc = nlohmann::json::parse(read_text(f.data / "snapshots" / row[0] / "index.json"));
        CHECK(doc["status"] == "sealed");
        CHECK(doc["outcome"] == row[1]);
    }
    auto checked = run_command({"/usr/bin/env", "python3", (source_dir() / "tests/crawl/check_archive_index.py").string(),
                                f.data.string(), id});
    INFO(checked.out << checked.err);
    CHECK(checked.exit_code == 0);
}
