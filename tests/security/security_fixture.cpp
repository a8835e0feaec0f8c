#include "tests/security/security_fixture.hpp"

#include "tests/support/db_query.hpp"
#include "tests/support/scratch_archive.hpp"
#include "tests/chaos/db_query.hpp"

#include <catch2/catch.hpp>

#include <fstream>

namespace orch::test {

namespace fs = std::filesystem;

namespace {

bool has(const std::vector<std::string>& args, const std::string& opt)
{
    for (const auto& a : args) {
        if (a == opt || a.rfind(opt + "=", 0) == 0) {
            return true;
        }
    }
    return false;
}

} // namespace

SecurityFixture::SecurityFixture()
    : root("orch-sec-"), plugins(root / "plugins"), data(root / "data"), out(root / "out")
{
    fs::permissions(root, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec |
                              fs::perms::group_read | fs::perms::group_exec);
    fs::create_directories(plugins);
    fs::create_directories(data);
    fs::create_directories(out);
    fs::create_directories(root / "no-builtins");
}

fs::path SecurityFixture::write_hook(const std::string& plugin, const std::string& file, const std::string& body)
{
    return write_test_hook(plugins, plugin, file, body);
}

std::string SecurityFixture::add_crawl(const std::vector<std::string>& urls)
{
    std::vector<std::string> args = {"add"};
    args.insert(args.end(), urls.begin(), urls.end());
    auto r = run("orchestrator", args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto id = r.out.substr(0, r.out.find('\n'));
    REQUIRE(id.size() == 36);
    return id;
}

std::map<std::string, std::string> SecurityFixture::env(const std::map<std::string, std::string>& extra) const
{
    // run_command: an empty value unsets the variable, so "no built-in plugins" is an empty directory.
    std::map<std::string, std::string> e = {{"ORCH_BUILTIN_PLUGINS_DIR", (root / "no-builtins").string()},
                                            {"PLUGINS_DIR", plugins.string()},
                                            {"TEARDOWN_GRACE", "1"},
                                            {"DATABASE_URL", ""},
                                            {"DATA_DIR", ""},
                                            {"PGPASSWORD", ""},
                                            {"ORCH_PROCESS_COOKIE", ""}};
    for (const auto& [k, v] : extra) {
        e[k] = v;
    }
    return e;
}

CommandResult SecurityFixture::run(const std::string& bin, std::vector<std::string> args,
                                   const std::map<std::string, std::string>& extra_env) const
{
    std::vector<std::string> argv = {bin_path(bin).string()};
    // The common options belong to the top-level app: before any subcommand.
    if (!has(args, "--database-url")) {
        argv.insert(argv.end(), {"--database-url", db.url()});
    }
    if (!has(args, "--data-dir")) {
        argv.insert(argv.end(), {"--data-dir", data.string()});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, env(extra_env));
}

std::string SecurityFixture::fingerprint() const
{
    return chaos::database_fingerprint(db.url());
}

std::string SecurityFixture::scalar(const std::string& sql) const
{
    return test::scalar(db.url(), sql);
}

} // namespace orch::test
