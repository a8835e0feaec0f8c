#include "tests/support/pg_fixture.hpp"

#include "common/db/conninfo_value.hpp"
#include "common/db/migrate.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <unistd.h>

namespace orch::test {
namespace {

std::string env_or_empty(const char* name)
{
    const char* v = std::getenv(name);
    return v == nullptr ? std::string{} : std::string(v);
}

} // namespace

std::string base_database_url()
{
    auto url = env_or_empty("TEST_DATABASE_URL");
    if (url.empty()) {
        url = env_or_empty("DATABASE_URL");
    }
    if (url.empty()) {
        throw std::runtime_error("no test database: set TEST_DATABASE_URL (scripts/test starts a throwaway "
                                 "PostgreSQL and sets it for you)");
    }
    return url;
}

std::string with_conninfo_options(const std::string& conninfo,
                                  const std::map<std::string, std::optional<std::string>>& changes)
{
    char* err = nullptr;
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
    if (options == nullptr) {
        std::string msg = err != nullptr ? err : "invalid connection string";
        PQfreemem(err);
        throw std::runtime_error(msg);
    }
    std::string out;
    for (auto* o = options; o->keyword != nullptr; ++o) {
        if (o->val == nullptr || changes.count(o->keyword) != 0) {
            continue;
        }
        out += fmt::format("{}={} ", o->keyword, quote_conninfo_value(o->val));
    }
    PQconninfoFree(options);
    for (const auto& [keyword, value] : changes) {
        if (value) {
            out += fmt::format("{}={} ", keyword, quote_conninfo_value(*value));
        }
    }
    if (!out.empty()) {
        out.pop_back();
    }
    return out;
}

std::string with_dbname(const std::string& conninfo, const std::string& dbname)
{
    return with_conninfo_options(conninfo, {{"dbname", dbname}});
}

ScratchDatabase::ScratchDatabase(bool migrated)
{
    static std::atomic<int> counter{0};
    m_name = fmt::format("orch_test_{}_{}", ::getpid(), counter++);
    auto base = base_database_url();
    {
        pqxx::connection admin(base);
        pqxx::nontransaction tx(admin);
        tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(m_name) + " WITH (FORCE)");
        tx.exec0("CREATE DATABASE " + tx.quote_name(m_name));
    }
    m_url = with_dbname(base, m_name);
    if (migrated) {
        auto conn = connect();
        apply_migrations(*conn);
    }
}

ScratchDatabase::~ScratchDatabase()
{
    try {
        pqxx::connection admin(base_database_url());
        pqxx::nontransaction tx(admin);
        tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(m_name) + " WITH (FORCE)");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: could not drop scratch database %s: %s\n", m_name.c_str(), e.what());
    }
}

std::unique_ptr<pqxx::connection> ScratchDatabase::connect() const
{
    return std::make_unique<pqxx::connection>(m_url);
}

std::filesystem::path program_path(const std::string& name)
{
    auto dir = env_or_empty("TEST_PROGRAMS_DIR");
    if (dir.empty()) {
        throw std::runtime_error("TEST_PROGRAMS_DIR is not set (run tests through ctest)");
    }
    return std::filesystem::path(dir) / name;
}

std::filesystem::path bin_path(const std::string& name)
{
    auto dir = env_or_empty("ORCH_BIN_DIR");
    if (dir.empty()) {
        throw std::runtime_error("ORCH_BIN_DIR is not set (run tests through ctest)");
    }
    return std::filesystem::path(dir) / name;
}

std::filesystem::path source_dir()
{
    auto dir = env_or_empty("ORCH_SOURCE_DIR");
    if (dir.empty()) {
        throw std::runtime_error("ORCH_SOURCE_DIR is not set (run tests through ctest)");
    }
    return dir;
}

namespace {

long long stat_counter(pqxx::connection& conn, const std::string& sql, const std::string& name)
{
    pqxx::nontransaction tx(conn);
    tx.exec("SELECT pg_stat_force_next_flush()");
    tx.exec("SELECT pg_stat_clear_snapshot()");
    return tx.exec_params1(sql, name)[0].as<long long>();
}

} // namespace

long long seq_scans(pqxx::connection& conn, const std::string& table)
{
    return stat_counter(conn, "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = $1", table);
}

long long index_scans(pqxx::connection& conn, const std::string& index)
{
    return stat_counter(conn, "SELECT coalesce((SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1), 0)",
                        index);
}

} // namespace orch::test
