#include "tests/chaos/db_query.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <thread>

namespace orch::chaos {

std::vector<Row> query_retry(const std::string& url, const std::string& sql, int seconds)
{
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
        try {
            return query(url, sql);
        } catch (const pqxx::broken_connection&) {
            if (std::chrono::steady_clock::now() >= deadline) {
                throw;
            }
        } catch (const pqxx::sql_error& e) {
            // 57P01/57P03: the server is shutting down or starting up.
            std::string state = e.sqlstate();
            if (state.rfind("57P", 0) != 0 || std::chrono::steady_clock::now() >= deadline) {
                throw;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

std::string database_fingerprint(const std::string& url)
{
    std::string out;
    for (const auto& t : query(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")) {
        // machine.last_seen moves whenever any executable registers; compare the rest.
        std::string row = t[0] == "machine" ? "ROW(t.id, t.hostname, t.boot_id, t.cpu_count, t.containment)" : "t.*";
        auto sql = "SELECT count(*) || ':' || coalesce(md5(string_agg(x, '|' ORDER BY x)), '') FROM (SELECT (" +
                   row + ")::text AS x FROM public.\"" + t[0] + "\" t) s";
        out += t[0] + "=" + scalar(url, sql) + " ";
    }
    return out;
}

} // namespace orch::chaos
