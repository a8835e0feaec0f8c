// The pure parts of the crawl index: what is redacted, how text and paths are escaped,
// and AtomicFile's all-or-nothing replacement.

#include "common/base/atomic_file.hpp"
#include "crawl_worker/crawl_index.hpp"
#include "tests/crawl/crawl_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <stdexcept>

using namespace orch;

TEST_CASE("crawl index: config secrets are redacted at any depth - other values kept", "[archive]")
{
    auto config = nlohmann::ordered_json::parse(R"({
        "CHROME_TIMEOUT": 60, "S3_SECRET": "x", "upload_token": "y", "AWS_KEY": 3,
        "PROXY": "http://user:pw@proxy.test:3128/", "SEED_URL": "http://example.test/a@b",
        "nested": {"DB_PASSWORD": ["a", "b"], "list": ["ok", "ftp://u:p@h/"]}})");
    auto out = redacted_config(config);
    CHECK(out["CHROME_TIMEOUT"] == 60);
    CHECK(out["S3_SECRET"] == "[redacted]");
    CHECK(out["upload_token"] == "[redacted]");
    CHECK(out["AWS_KEY"] == "[redacted]");
    CHECK(out["PROXY"] == "[redacted]");
    CHECK(out["SEED_URL"] == "http://example.test/a@b");
    CHECK(out["nested"]["DB_PASSWORD"] == nlohmann::ordered_json::parse(R"(["[redacted]", "[redacted]"])"));
    CHECK(out["nested"]["list"] == nlohmann::ordered_json::parse(R"(["ok", "[redacted]"])"));
}

TEST_CASE("crawl index: HTML text and URL paths are escaped", "[archive]")
{
    CHECK(html_escaped("<script>alert('x') & \"y\"</script>") ==
          "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
    CHECK(url_path_escaped("cap/warc/a b#1?.warc.gz") == "cap/warc/a%20b%231%3F.warc.gz");
    CHECK(url_path_escaped("100%/\xc3\xa9") == "100%25/%C3%A9");
}

TEST_CASE("atomic file: replaced whole on commit - untouched when not committed", "[archive]")
{
    orch::test::ScratchDir dir("orch-atomic-");
    const auto path = dir.path() / "index.json";
    std::ofstream(path) << "old";
    try {
        AtomicFile file(path);
        file << "half";
        throw std::runtime_error("interrupted");
    } catch (const std::runtime_error&) {
    }
    CHECK(orch::test::read_text(path) == "old");
    {
        AtomicFile file(path);
        const std::string big(200 * 1024, 'x'); // past the buffer: written in several writes
        file << "new:" << big;
        CHECK(orch::test::read_text(path) == "old");
        file.commit(true);
        CHECK(orch::test::read_text(path).size() == 4 + big.size());
    }
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        ++entries;
    }
    CHECK(entries == 1);
    CHECK_THROWS_AS(AtomicFile(dir.path() / "missing" / "index.json"), std::system_error);
}
