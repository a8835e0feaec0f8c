#include "tests/support/scratch_archive.hpp"

#include "tests/support/command_runner.hpp"
#include "tests/support/db_query.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/spawned_process.hpp"

#include <catch2/catch.hpp>

#include <fstream>

namespace orch::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_preamble = R"(#!/usr/bin/env bash
set -u
url=""; snap=""; crawl=""
for arg in "$@"; do
  case "$arg" in
    --url=*) url="${arg#--url=}" ;;
    --snapshot-id=*) snap="${arg#--snapshot-id=}" ;;
    --crawl-id=*) crawl="${arg#--crawl-id=}" ;;
  esac
done
)";

} // namespace

fs::path write_test_hook(const fs::path& plugins, const std::string& plugin, const std::string& file,
                         const std::string& body)
{
    auto dir = plugins / plugin;
    fs::create_directories(dir);
    auto path = dir / file;
    auto tmp = dir / (file + ".tmp");
    std::ofstream(tmp) << k_preamble << body << "\n";
    fs::permissions(tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
    fs::rename(tmp, path);
    return path;
}

ScratchArchive::ScratchArchive(const std::string& prefix)
    : root(prefix), plugins(root / "plugins"), data(root / "data")
{
    fs::create_directories(plugins);
    fs::create_directories(data);
}

std::string ScratchArchive::add_crawl(const std::vector<std::string>& urls, const std::vector<std::string>& options)
{
    std::vector<std::string> argv = {bin_path("orchestrator").string(), "add", "--database-url", db.url(),
                                     "--data-dir", data.string()};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), urls.begin(), urls.end());
    auto r = run_command(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto id = r.out.substr(0, r.out.find('\n'));
    REQUIRE(id.size() == 36);
    return id;
}

fs::path ScratchArchive::write_hook(const std::string& plugin, const std::string& file, const std::string& body)
{
    return write_test_hook(plugins, plugin, file, body);
}

void ScratchArchive::write_config(const std::string& plugin, const std::string& json)
{
    fs::create_directories(plugins / plugin);
    std::ofstream(plugins / plugin / "config.json") << json;
}

pqxx::connection& ScratchArchive::conn()
{
    if (!m_conn) {
        m_conn = db.connect();
    }
    return *m_conn;
}

std::string ScratchArchive::scalar(const std::string& sql)
{
    return test::scalar(conn(), sql);
}

std::vector<std::vector<std::string>> ScratchArchive::rows(const std::string& sql)
{
    return query(conn(), sql);
}

void ScratchArchive::exec(const std::string& sql)
{
    execute(conn(), sql);
}

std::string ScratchArchive::quote(const std::string& text)
{
    return conn().quote(text);
}

std::vector<std::string> ScratchArchive::our_processes(const std::string& where, bool by_path)
{
    std::vector<std::string> cookies;
    for (const auto& row : rows("SELECT cookie FROM process WHERE cookie IS NOT NULL AND (" + where + ")")) {
        cookies.push_back("ORCH_PROCESS_COOKIE=" + row[0]);
    }
    return processes_marked(cookies, by_path ? root.path().string() : std::string());
}

std::vector<std::string> ScratchArchive::wait_no_leftovers(std::chrono::milliseconds timeout)
{
    std::vector<std::string> left;
    eventually(
        [&] {
            left = our_processes();
            return left.empty();
        },
        timeout);
    return left;
}

} // namespace orch::test
