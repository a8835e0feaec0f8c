// Bad input: every case gets a clear message, its documented exit code
// (common/base/exit_codes.hpp) and leaves the database exactly as it was.
#include "tests/security/security_fixture.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>

#include <tuple>

#include <sys/mount.h>
#include <unistd.h>

#include <fstream>
#include <map>

using namespace orch::test;
namespace fs = std::filesystem;

namespace {

// Checks one rejected command: exit code, a message naming `needle`, no DB change.
void expect_rejected(const SecurityFixture& f, const CommandResult& r, int code, const std::string& needle,
                     const std::string& before)
{
    INFO("stderr: " << r.err.substr(0, 2000));
    INFO("stdout: " << r.out.substr(0, 500));
    CHECK(r.exit_code == code);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK(f.fingerprint() == before);
}

const char* k_unknown_uuid = "0b6f2ad8-8d53-4b55-9d7a-1f0c8a9e1c42";

} // namespace

TEST_CASE("malformed ids are rejected with exit 7 by every executable", "[bad_input][ids]")
{
    SecurityFixture f;
    f.add_crawl({"http://ids.test/"});
    auto before = f.fingerprint();
    for (const std::string id : {"not-a-uuid", "'; DROP TABLE crawl; --", "../../etc/passwd", "",
                                 "0b6f2ad8-8d53-4b55-9d7a-1f0c8a9e1c4", "0b6f2ad8-8d53-4b55-9d7a-1f0c8a9e1c42x"}) {
        DYNAMIC_SECTION("id '" << id << "'")
        {
            expect_rejected(f, f.run("crawl_worker", {"--crawl-id", id}), 7, "crawl id", before);
            expect_rejected(f, f.run("snapshot_worker", {"--snapshot-id", id}), 7, "snapshot id", before);
            expect_rejected(f, f.run("orchestrator", {"schedule", "disable", id}), 7, "id", before);
            expect_rejected(f, f.run("orchestrator", {"schedule", "enable", id}), 7, "id", before);
        }
    }
    SECTION("a malformed --process-id")
    {
        expect_rejected(f, f.run("snapshot_worker", {"--snapshot-id", k_unknown_uuid, "--process-id", "x'"}), 7,
                        "process id", before);
        expect_rejected(f, f.run("crawl_worker", {"--crawl-id", k_unknown_uuid, "--process-id", "x'"}), 7,
                        "process id", before);
    }
}

TEST_CASE("unknown ids are rejected with exit 6 and change nothing", "[bad_input][ids]")
{
    SecurityFixture f;
    f.add_crawl({"http://ids.test/"});
    auto before = f.fingerprint();
    expect_rejected(f, f.run("crawl_worker", {"--crawl-id", k_unknown_uuid}), 6, k_unknown_uuid, before);
    expect_rejected(f, f.run("snapshot_worker", {"--snapshot-id", k_unknown_uuid}), 6, k_unknown_uuid, before);
    expect_rejected(f, f.run("orchestrator", {"schedule", "disable", k_unknown_uuid}), 6, k_unknown_uuid, before);
    expect_rejected(f, f.run("orchestrator", {"schedule", "enable", k_unknown_uuid}), 6, k_unknown_uuid, before);
}

TEST_CASE("invalid URLs are rejected with exit 7 and add nothing", "[bad_input][urls]")
{
    SecurityFixture f;
    f.add_crawl({"http://ok.test/"});
    auto before = f.fingerprint();
    std::vector<std::pair<std::string, std::string>> cases = {
        {"long", "http://long.test/" + std::string(9000, 'a')},
        {"binary", std::string("http://bin.test/\x01\x02\xff\xfe", 20)},
        {"nul inside", std::string("http://nul.test/a\0b", 19)},
        {"newline", "http://nl.test/a\nhttp://evil.test/"},
        {"carriage return", "http://cr.test/a\r\nX-Injected: 1"},
        {"javascript:", "javascript:alert(document.cookie)"},
        {"file://", "file:///etc/passwd"},
        {"data:", "data:text/html,<script>alert(1)</script>"},
        {"no scheme", "example.com/page"},
        {"option-like", "--database-url=host=/evil"},
        {"empty", ""},
        {"host label over 63 bytes", "http://" + std::string(64, 'a') + ".test/"},
        {"host over 253 bytes", "http://" + std::string(250, 'a').replace(50, 1, ".").replace(100, 1, ".")
                                            .replace(150, 1, ".").replace(200, 1, ".") + ".test/"},
        {"empty host label", "http://a..test/"},
        {"host label ending in hyphen", "http://a-.test/"},
        {"number host not IPv4", "http://999.1.1.1/"},
        {"short IPv4", "http://1.2.3/"},
        {"bad IPv6", "http://[1.2.3.4]/"},
        {"percent-encoded host", "http://%65vil.test/"},
        {"host IDNA refuses", "http://\xe2\x98\x83.test/"},
        {"full-width solidus in host", "http://evil.test\xef\xbc\x8f.ok.test/"},
    };
    for (const auto& [name, url] : cases) {
        // argv cannot carry a NUL (it would arrive cut short, as a valid URL).
        if (url.find('\0') == std::string::npos) DYNAMIC_SECTION("as an argument: " << name)
        {
            auto r = f.run("orchestrator", {"add", "--", url});
            INFO("stderr: " << r.err);
            CHECK(r.exit_code == 7);
            CHECK(f.fingerprint() == before);
        }
        // Blank lines are allowed in a URLs file; a newline would make two lines.
        if (url.find('\n') == std::string::npos && !url.empty()) {
            DYNAMIC_SECTION("in a URLs file: " << name)
            {
                auto file = f.root / "urls.txt";
                std::ofstream(file, std::ios::binary) << "http://fine.test/\n" << url << "\n";
                auto r = f.run("orchestrator", {"add", "--urls-file", file.string()});
                INFO("stderr: " << r.err);
                CHECK(r.exit_code == 7);
                CHECK(r.err.find("invalid URL") != std::string::npos);
                CHECK(f.fingerprint() == before);
            }
        }
    }
}

TEST_CASE("free text that is not UTF-8 is rejected with exit 7 naming its option - nothing written",
          "[bad_input][utf8]")
{
    SecurityFixture f;
    auto id = f.add_crawl({"http://text.test/"});
    auto before = f.fingerprint();
    // A lone continuation byte, a byte never valid in UTF-8, an overlong '/' and a
    // surrogate, each after valid text.
    for (const std::string& bad : {std::string("\xff"), std::string("caf\xc3"), std::string("a\xc0\xaf" "b"),
                                  std::string("x\xed\xa0\x80")}) {
        DYNAMIC_SECTION("value of " << bad.size() << " bytes")
        {
            expect_rejected(f, f.run("orchestrator", {"add", "http://text.test/", "--label", bad}), 7,
                            "--label: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"add", "http://text.test/", "--tag", "ok", "--tag", bad}), 7,
                            "--tag: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"pause", id, "--reason", bad}), 7,
                            "--reason: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"schedule", "add", "--every", "@daily", "--label", bad,
                                                      "http://text.test/"}),
                            7, "--label: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"schedule", "add", "--every", "@daily", "--tag", bad,
                                                      "http://text.test/"}),
                            7, "--tag: the value is not valid UTF-8", before);
            // Filters of the read-only commands too: nothing could match, but a
            // raw database error (exit 1) is not the answer.
            expect_rejected(f, f.run("orchestrator", {"crawls", "--label", bad}), 7,
                            "--label: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"crawls", "--tag", bad}), 7,
                            "--tag: the value is not valid UTF-8", before);
            expect_rejected(f, f.run("orchestrator", {"events", "--kind", bad}), 7,
                            "--kind: the value is not valid UTF-8", before);
        }
    }
    // Valid UTF-8 beyond ASCII is text like any other.
    auto fine = f.run("orchestrator", {"pause", id, "--reason", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x93\xa6"});
    INFO(fine.err);
    CHECK(fine.exit_code == 0);
    CHECK(f.scalar("SELECT message FROM event WHERE kind = 'crawl.paused'") ==
          "paused by operator: caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x93\xa6");
}

TEST_CASE("an age longer than 100 years is rejected with exit 7 - not a raw SQL error - 100 years is accepted",
          "[bad_input][age]")
{
    SecurityFixture f;
    f.add_crawl({"http://age.test/"});
    auto before = f.fingerprint();
    const std::vector<std::pair<std::vector<std::string>, std::string>> too_long = {
        {{"ps", "--since", "9999999w"}, "--since '9999999w'"},
        {{"ps", "--since", "36526d"}, "--since '36526d'"},
        {{"events", "--since", "9223372036854775807s"}, "--since '9223372036854775807s'"},
        {{"events", "--since", "99999999999999999999s"}, "--since '99999999999999999999s'"},
        {{"crawls", "--since", "5218w"}, "--since '5218w'"},
        {{"prune", "--older-than", "99999999999d"}, "--older-than '99999999999d'"},
        {{"prune", "--older-than", "876601h", "--dry-run"}, "--older-than '876601h'"},
    };
    for (const auto& [args, needle] : too_long) {
        auto r = f.run("orchestrator", args);
        expect_rejected(f, r, 7, needle + ": too long; at most 100 years", before);
        CHECK(r.err.find("database error") == std::string::npos);
    }
    // The bound itself, in each unit, reaches the database and is answered.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"ps", "--since", "36525d", "--json"}, {"ps", "--since", "5217w", "--json"},
          {"events", "--since", "876600h", "--json"}, {"crawls", "--since", "52596000m", "--json"},
          {"events", "--since", "3155760000s", "--json"}, {"prune", "--older-than", "36525d", "--dry-run"}}) {
        auto r = f.run("orchestrator", args);
        INFO(args[0] << " " << args[1] << " " << args[2] << ": " << r.err);
        CHECK(r.exit_code == 0);
    }
}

TEST_CASE("a malformed config.json stops the worker with exit 3 naming the file - nothing claimed", "[bad_input][config]")
{
    SecurityFixture f;
    f.write_hook("broken", "on_Snapshot__10_x.sh", "echo ran >> '" + (f.out / "ran").string() + "'");
    std::ofstream(f.plugins / "broken" / "config.json") << "{\"timeout\": 10,, oops";
    auto crawl = f.add_crawl({"http://cfg.test/"});
    auto before = f.fingerprint();
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    expect_rejected(f, r, 3, (f.plugins / "broken" / "config.json").string(), before);
    CHECK(f.scalar("SELECT status || '/' || attempts || '/' || coalesce(lease_owner::text, '-') FROM crawl") ==
          "queued/0/-");
    CHECK_FALSE(fs::exists(f.out / "ran"));
    SECTION("the orchestrator does not claim it either")
    {
        // Bounded: a worker that fails on config must not be respawned forever.
        EnvChanges env;
        for (const auto& [k, v] : f.env()) {
            env[k] = v.empty() ? std::nullopt : std::optional<std::string>(v);
        }
        SpawnedProcess o({bin_path("orchestrator").string(), "--database-url", f.db.url(), "--data-dir",
                          f.data.string(), "--idle-window", "0"},
                         env);
        bool exited = o.wait_for(std::chrono::seconds(20));
        INFO("stderr: " << o.err().substr(0, 3000));
        CHECK(exited);
        CHECK(o.exit_code() == 3);
        CHECK(o.err().find("config.json") != std::string::npos);
        CHECK(f.scalar("SELECT status || '/' || attempts FROM crawl") == "queued/0");
        CHECK(f.scalar("SELECT count(*) FROM process WHERE process_type = 'worker'") == "0");
    }
}

TEST_CASE("a plugins directory that cannot be read is a configuration error (3)", "[bad_input][config]")
{
    SecurityFixture f;
    auto crawl = f.add_crawl({"http://pd.test/"});
    auto before = f.fingerprint();
    SECTION("a file instead of a directory")
    {
        auto file = f.root / "not-a-dir";
        std::ofstream(file) << "x";
        expect_rejected(f, f.run("crawl_worker", {"--crawl-id", crawl}, {{"PLUGINS_DIR", file.string()}}), 3,
                        file.string(), before);
    }
    SECTION("a directory that does not exist")
    {
        auto missing = f.root / "missing";
        expect_rejected(f, f.run("crawl_worker", {"--crawl-id", crawl}, {{"PLUGINS_DIR", missing.string()}}), 3,
                        missing.string(), before);
    }
}

TEST_CASE("hooks and plugins that escape their directory through symlinks never run", "[bad_input][traversal]")
{
    SecurityFixture f;
    auto outside = f.root / "outside";
    fs::create_directories(outside);
    auto marker = f.out / "escaped";
    std::ofstream(outside / "evil.sh") << "#!/usr/bin/env bash\necho ran >> '" << marker.string() << "'\n";
    fs::permissions(outside / "evil.sh", fs::perms::owner_all);
    fs::create_directories(f.plugins / "sneaky");
    fs::create_symlink(outside / "evil.sh", f.plugins / "sneaky" / "on_Snapshot__10_evil.sh");
    fs::create_symlink("../../outside/evil.sh", f.plugins / "sneaky" / "on_Snapshot__11_rel.sh");
    fs::create_symlink(outside, f.plugins / "..escape");
    fs::create_directories(outside / "sub");
    fs::copy_file(outside / "evil.sh", outside / "on_Snapshot__12_x.sh");
    fs::create_symlink(outside, f.plugins / "linked_plugin");
    f.write_hook("fine", "on_Snapshot__20_fine.sh", "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'");
    auto crawl = f.add_crawl({"http://trav.test/"});
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    INFO(r.err.substr(0, 3000));
    CHECK(r.exit_code == 0);
    CHECK_FALSE(fs::exists(marker));
    CHECK(f.scalar("SELECT string_agg(hook_name || '=' || status, ',' ORDER BY hook_name) FROM archive_result") ==
          "fine/on_Snapshot__20_fine.sh=succeeded");
}

TEST_CASE("a wrong or unreachable database URL exits 4 without a secret in the message", "[bad_input][db]")
{
    SecurityFixture f;
    auto before = f.fingerprint();
    for (const std::string url : {"postgresql://archive:hunter2-secret@127.0.0.1:1/archive",
                                  "host=/nonexistent/socket/dir dbname=archive password=hunter2-secret",
                                  "postgresql://archive:hunter2-secret@[::1]:1/x?connect_timeout=2",
                                  "this is = not a conninfo"}) {
        DYNAMIC_SECTION(url)
        {
            for (const auto& [bin, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
                     {"orchestrator", {"--idle-window", "0"}},
                     {"orchestrator", {"add", "http://x.test/"}},
                     {"crawl_worker", {"--crawl-id", k_unknown_uuid}},
                     {"snapshot_worker", {"--snapshot-id", k_unknown_uuid}}}) {
                auto a = args;
                a.insert(a.begin(), {"--database-url", url});
                auto r = f.run(bin, a);
                INFO(bin << ": " << r.err);
                CHECK(r.exit_code == 4);
                CHECK(r.err.find("PostgreSQL") + r.err.find("database") != 2 * std::string::npos);
                CHECK(r.err.find("hunter2") == std::string::npos);
            }
        }
    }
    CHECK(f.fingerprint() == before);
}

TEST_CASE("a data directory that is not writable is a configuration error (3)", "[bad_input][data_dir]")
{
    SecurityFixture f;
    auto crawl = f.add_crawl({"http://dd.test/"});
    auto before = f.fingerprint();
    SECTION("a file instead of a directory")
    {
        auto file = f.root / "file";
        std::ofstream(file) << "x";
        for (const auto& [bin, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
                 {"orchestrator", {"--idle-window", "0"}},
                 {"orchestrator", {"add", "http://x.test/"}},
                 {"crawl_worker", {"--crawl-id", crawl}}}) {
            auto a = args;
            a.insert(a.begin(), {"--data-dir", file.string()});
            expect_rejected(f, f.run(bin, a), 3, file.string(), before);
        }
    }
    SECTION("a read-only mount")
    {
        REQUIRE(::geteuid() == 0);
        auto ro = f.root / "ro";
        fs::create_directories(ro);
        REQUIRE(::mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m") == 0);
        struct Unmount {
            fs::path p;
            ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
        } unmount{ro};
        for (const auto& [bin, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
                 {"orchestrator", {"--idle-window", "0"}},
                 {"crawl_worker", {"--crawl-id", crawl}}}) {
            auto a = args;
            a.insert(a.begin(), {"--data-dir", ro.string()});
            expect_rejected(f, f.run(bin, a), 3, ro.string(), before);
        }
    }
}

TEST_CASE("a malformed setting in the environment is a configuration error (3) naming it - nothing changes",
          "[bad_input][settings]")
{
    SecurityFixture f;
    auto crawl = f.add_crawl({"http://settings.test/"});
    auto snapshot = f.scalar("INSERT INTO snapshot (crawl_id, url) VALUES ('" + crawl +
                             "', 'http://settings.test/') RETURNING id");
    auto before = f.fingerprint();
    // Some used to fall back to their default without a word (LEASE_TTL,
    // HOOK_LOG_MAX_BYTES, ORCH_CONTAINMENT). Every executable checks every one, also
    // those only its workers read: they inherit its environment, and would each
    // refuse their snapshot in turn after the crawl was claimed.
    const std::vector<std::pair<std::string, std::string>> settings{
        {"LEASE_TTL", "30s"},          {"LEASE_TTL", "1"},          {"LEASE_TTL", "99999"},
        {"HOOK_LOG_MAX_BYTES", "10"},  {"HOOK_LOG_MAX_BYTES", "-1"}, {"HOOK_LOG_MAX_BYTES", "64M"},
        {"TEARDOWN_GRACE", "0"},       {"SNAPSHOT_MAX_ATTEMPTS", "x"}, {"HOOK_PARALLELISM", "65"},
        {"SNAPSHOT_WORKER_MAX_SNAPSHOTS", "0"}, {"SNAPSHOT_WORKER_BATCH", "17"}, {"ORCH_CONTAINMENT", "fallbak"}};
    const std::map<std::string, std::vector<std::string>> args{
        {"orchestrator", {"--idle-window", "0"}},
        {"crawl_worker", {"--crawl-id", crawl}},
        {"snapshot_worker", {"--snapshot-id", snapshot}}};
    for (const auto& [name, value] : settings) {
        for (const auto& bin : {"orchestrator", "crawl_worker", "snapshot_worker"}) {
            DYNAMIC_SECTION(bin << " with " << name << "=" << value)
            {
                auto r = f.run(bin, args.at(bin), {{name, value}});
                expect_rejected(f, r, 3, name + " must be", before);
                CHECK(r.err.find("'" + value + "'") != std::string::npos);
            }
        }
    }
}

TEST_CASE("a malformed option value from the environment is a configuration error (3) - on the command line a usage "
          "error (2)",
          "[bad_input][settings]")
{
    SecurityFixture f;
    auto crawl = f.add_crawl({"http://settings.test/"});
    auto before = f.fingerprint();
    // Options bound to a variable (CLI11 checks them): the same value is a
    // setting when it comes from the service's environment.
    const std::vector<std::tuple<std::string, std::string, std::string>> cases{
        {"orchestrator", "MAX_CRAWL_WORKERS", "abc"}, {"orchestrator", "STOP_GRACE", "0"},
        {"orchestrator", "LOG_FORMAT", "xml"},        {"orchestrator", "METRICS_LISTEN", "garbage"},
        {"crawl_worker", "LOG_LEVEL", "loud"}};
    for (const auto& [bin, name, value] : cases) {
        DYNAMIC_SECTION(bin << " with " << name << "=" << value)
        {
            std::vector<std::string> args{"--idle-window", "0"};
            if (bin == "crawl_worker") {
                args = {"--crawl-id", crawl};
            }
            auto r = f.run(bin, args, {{name, value}});
            expect_rejected(f, r, 3, "environment variable " + name, before);
            CHECK(r.err.find(value) != std::string::npos);
        }
    }
    SECTION("the same on the command line")
    {
        auto r = f.run("orchestrator", {"--max-crawl-workers", "abc", "--idle-window", "0"});
        CHECK(r.exit_code == 2);
        auto m = f.run("orchestrator", {"--metrics-listen", "garbage", "--idle-window", "0"});
        INFO(m.err);
        CHECK(m.exit_code == 7);
    }
}

TEST_CASE("a machine id that is not printable UTF-8 is bad input (7) - nothing changes", "[bad_input][settings]")
{
    SecurityFixture f;
    auto crawl = f.add_crawl({"http://machine.test/"});
    auto before = f.fingerprint();
    for (const auto& id : {std::string("\xff\xfe"), std::string("tab\there"), std::string(129, 'm')}) {
        DYNAMIC_SECTION("id of " << id.size() << " bytes")
        {
            expect_rejected(f, f.run("orchestrator", {"--machine-id", id, "--idle-window", "0"}), 7, "machine id must be",
                            before);
            expect_rejected(f, f.run("crawl_worker", {"--crawl-id", crawl}, {{"MACHINE_ID", id}}), 7,
                            "machine id must be", before);
        }
    }
}

TEST_CASE("hostile JSONL fails the archive result cleanly - the worker survives", "[bad_input][jsonl]")
{
    SecurityFixture f;
    // One hook per kind of hostile output; each claims to be a result record.
    f.write_hook("hostile", "on_Snapshot__10_huge_line.sh",
                 "printf '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"'\n"
                 "head -c 64000000 /dev/zero | tr '\\0' a\nprintf '\"}\\n'");
    f.write_hook("hostile", "on_Snapshot__11_deep.sh",
                 "printf '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_json\":'\n"
                 "head -c 200000 /dev/zero | tr '\\0' '['\nhead -c 200000 /dev/zero | tr '\\0' ']'\nprintf '}\\n'");
    f.write_hook("hostile", "on_Snapshot__12_bad_utf8.sh",
                 "printf '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"\\xff\\xfe\\xc3\\x28\"}\\n'");
    f.write_hook("hostile", "on_Snapshot__13_nul.sh",
                 "printf '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"a\\\\u0000b\"}\\n'");
    f.write_hook("hostile", "on_Snapshot__14_two_records.sh",
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'\n"
                 "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'");
    f.write_hook("hostile", "on_Snapshot__20_after.sh", "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'");
    auto crawl = f.add_crawl({"http://jsonl.test/"});
    auto r = f.run("crawl_worker", {"--crawl-id", crawl});
    INFO(r.err.substr(0, 4000));
    CHECK(r.exit_code == 0);
    // \u0000 is valid JSON that PostgreSQL text cannot hold: any terminal status, as long as it is recorded.
    auto results = f.scalar("SELECT string_agg(hook_name || '=' || status, ',' ORDER BY hook_name) FROM "
                            "archive_result WHERE hook_name NOT LIKE '%13_nul%'");
    CHECK(results == "hostile/on_Snapshot__10_huge_line.sh=failed,hostile/on_Snapshot__11_deep.sh=failed,"
                     "hostile/on_Snapshot__12_bad_utf8.sh=failed,"
                     "hostile/on_Snapshot__14_two_records.sh=failed,hostile/on_Snapshot__20_after.sh=succeeded");
    CHECK(f.scalar("SELECT status IN ('succeeded', 'failed') FROM archive_result WHERE hook_name LIKE '%13_nul%'") ==
          "t");
    CHECK(f.scalar("SELECT count(*) FROM archive_result WHERE status = 'failed' AND coalesce(error, '') = ''") ==
          "0");
    CHECK(f.scalar("SELECT status FROM snapshot") == "sealed");
    CHECK(f.scalar("SELECT max(length(coalesce(output_str, ''))) FROM archive_result") != "64000000");
}
