#pragma once

#include "tests/support/pg_fixture.hpp"
#include "tests/support/scratch_dir.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace orch::test {

// Writes <plugins>/<plugin>/<file>: a bash preamble that sets $url, $snap and
// $crawl from the hook arguments, then `body`. Written beside and renamed into
// place, so a hook starting meanwhile runs the old text or the new one, never
// half of it. Returns the path. Throws std::filesystem::filesystem_error.
std::filesystem::path write_test_hook(const std::filesystem::path& plugins, const std::string& plugin,
                                      const std::string& file, const std::string& body);

// What every test that drives the real executables starts from: a scratch
// database, and a temp root holding a plugins directory and a data directory
// (the root is removed on destruction unless ORCH_KEEP_TEST_DIRS is set). The
// fixtures of the crawl worker and orchestrator tests build on it; its reads
// go through one connection, opened at first use.
class ScratchArchive {
public:
    // `prefix` names the temp root (e.g. "orch-cw-").
    explicit ScratchArchive(const std::string& prefix);
    ScratchArchive(const ScratchArchive&) = delete;
    ScratchArchive& operator=(const ScratchArchive&) = delete;

    ScratchDatabase db;
    ScratchDir root; // before everything that lives in it
    std::filesystem::path plugins;
    std::filesystem::path data;

    // `orchestrator add` of `urls` with extra options (--depth 1 ...); fails the
    // test unless it succeeds; returns the crawl id.
    std::string add_crawl(const std::vector<std::string>& urls, const std::vector<std::string>& options = {});
    // write_test_hook into our plugins directory.
    std::filesystem::path write_hook(const std::string& plugin, const std::string& file, const std::string& body);
    // Writes plugins/<plugin>/config.json.
    void write_config(const std::string& plugin, const std::string& json);

    // First column of the first row of `sql` ("" for NULL or no row).
    std::string scalar(const std::string& sql);
    long count(const std::string& sql) { return std::stol(scalar(sql)); }
    // All rows, each column as text ("" for NULL).
    std::vector<std::vector<std::string>> rows(const std::string& sql);
    void exec(const std::string& sql);
    // `text` quoted as an SQL literal.
    std::string quote(const std::string& text);

    // Live processes carrying the cookie of a process row matching `where` (SQL)
    // and, when `by_path`, those naming the temp root on their command line:
    // "pid cmdline".
    std::vector<std::string> our_processes(const std::string& where = "TRUE", bool by_path = true);
    // our_processes(), polled until empty or `timeout`; returns what is left.
    std::vector<std::string> wait_no_leftovers(std::chrono::milliseconds timeout = std::chrono::seconds(10));

protected:
    pqxx::connection& conn();

private:
    std::unique_ptr<pqxx::connection> m_conn;
};

} // namespace orch::test
