#pragma once

#include <pqxx/pqxx>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace orch::test {

// The server every test talks to: TEST_DATABASE_URL, else DATABASE_URL. Tests never
// skip for want of a database: without one, this throws and the test fails loudly.
std::string base_database_url();

// A scratch database created for one test (orch_test_<pid>_<n>), with the
// migrations applied unless `migrated` is false, dropped (WITH FORCE) on destruction.
class ScratchDatabase {
public:
    explicit ScratchDatabase(bool migrated = true);
    ~ScratchDatabase();
    ScratchDatabase(const ScratchDatabase&) = delete;
    ScratchDatabase& operator=(const ScratchDatabase&) = delete;

    // libpq key=value connection string for the scratch database.
    const std::string& url() const { return m_url; }
    const std::string& name() const { return m_name; }
    std::unique_ptr<pqxx::connection> connect() const;

private:
    std::string m_name;
    std::string m_url;
};

// `conninfo` (key=value or URI form) as key=value, with each keyword of
// `changes` set to its value, or removed where the value is nullopt.
std::string with_conninfo_options(const std::string& conninfo,
                                  const std::map<std::string, std::optional<std::string>>& changes);
// `conninfo` with its dbname replaced.
std::string with_dbname(const std::string& conninfo, const std::string& dbname);

// Paths of built programs: stand-in hooks (TEST_PROGRAMS_DIR) and the executables (ORCH_BIN_DIR).
std::filesystem::path program_path(const std::string& name);
std::filesystem::path bin_path(const std::string& name);
std::filesystem::path source_dir();

// Sequential scans of `table` (pg_stat_user_tables) and uses of `index`
// (pg_stat_user_indexes, 0 before its first) so far, with this backend's counts
// flushed first: a test of a plan reads them before and after.
long long seq_scans(pqxx::connection& conn, const std::string& table);
long long index_scans(pqxx::connection& conn, const std::string& index);

} // namespace orch::test
