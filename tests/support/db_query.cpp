#include "tests/support/db_query.hpp"

namespace orch::test {
namespace {

pqxx::result run(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params)
{
    pqxx::nontransaction tx(conn);
    // Without parameters, the simple query protocol: several statements in one string work.
    if (params.empty()) {
        return tx.exec(sql);
    }
    return tx.exec_params(sql, pqxx::prepare::make_dynamic_params(params));
}

} // namespace

std::vector<Row> query(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params)
{
    std::vector<Row> out;
    for (const auto& row : run(conn, sql, params)) {
        Row cols;
        for (const auto& f : row) {
            cols.push_back(f.is_null() ? std::string() : f.as<std::string>());
        }
        out.push_back(std::move(cols));
    }
    return out;
}

std::optional<std::string> value(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params)
{
    auto r = run(conn, sql, params);
    if (r.empty() || r.columns() == 0 || r[0][0].is_null()) {
        return std::nullopt;
    }
    return r[0][0].as<std::string>();
}

std::string scalar(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params)
{
    return value(conn, sql, params).value_or(std::string());
}

void execute(pqxx::connection& conn, const std::string& sql, const std::vector<std::string>& params)
{
    run(conn, sql, params);
}

std::vector<Row> query(const std::string& url, const std::string& sql)
{
    pqxx::connection conn(url);
    return query(conn, sql);
}

std::string scalar(const std::string& url, const std::string& sql)
{
    pqxx::connection conn(url);
    return scalar(conn, sql);
}

} // namespace orch::test
