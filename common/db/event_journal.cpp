#include "common/db/event_journal.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>

#include <pwd.h>
#include <unistd.h>

namespace orch {
namespace {

std::optional<std::string>& event_machine_id()
{
    static std::optional<std::string> id;
    return id;
}

std::optional<std::string> os_user()
{
    // getpwuid_r with a fixed buffer: a user database entry is short.
    passwd pw{};
    passwd* found = nullptr;
    char buffer[1024];
    if (::getpwuid_r(::geteuid(), &pw, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
        return std::string(found->pw_name);
    }
    return "uid " + std::to_string(::geteuid());
}

} // namespace

void set_event_machine_id(std::string machine_id)
{
    event_machine_id() = std::move(machine_id);
}

namespace {

constexpr const char* k_columns =
    "INSERT INTO event (kind, actor, os_user, machine_id, process_id, crawl_id, snapshot_id, message, detail) ";

// The values of k_columns, in its order.
std::vector<std::optional<std::string>> event_values(const std::string& actor, const Event& event)
{
    static const std::optional<std::string> user = os_user();
    return {event.kind,
            actor,
            user,
            event_machine_id(),
            event.process_id,
            event.crawl_id,
            event.snapshot_id,
            event.message,
            event.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

// $first..$first+8, cast as k_columns needs them; the message and the detail
// with the SQL of ChangeStatement::message and ::detail when given. Their
// placeholders stay referenced either way: a prepared statement cannot have a
// parameter whose type nothing determines.
std::string event_placeholders(std::size_t first, const std::string& message_sql = {},
                               const std::string& detail_sql = {})
{
    auto message = fmt::format("${}", first + 7);
    if (!message_sql.empty()) {
        message = fmt::format("coalesce(({}), {})", message_sql, message);
    }
    auto detail = fmt::format("${}::jsonb", first + 8);
    if (!detail_sql.empty()) {
        detail = fmt::format("{} || ({})", detail, detail_sql);
    }
    return fmt::format("${}, ${}, ${}, ${}, ${}::uuid, ${}::uuid, ${}::uuid, {}, {}", first, first + 1, first + 2,
                       first + 3, first + 4, first + 5, first + 6, message, detail);
}

} // namespace

void record_event(pqxx::transaction_base& tx, const std::string& actor, const Event& event)
{
    static const std::string sql = std::string(k_columns) + "VALUES (" + event_placeholders(1) + ")";
    const auto values = event_values(actor, event);
    tx.exec_params0(sql, values[0], values[1],
                    values[2], values[3], values[4], values[5], values[6], values[7], values[8]);
}

std::size_t record_event_with_change(pqxx::connection& conn, const std::string& name, const std::string& change,
                                     std::vector<std::optional<std::string>> params, const std::string& actor,
                                     const Event& event)
{
    return record_event_with_change(conn, ChangeStatement{name, "", change, "", ""}, std::move(params), actor, event)
        .size();
}

namespace {

// The statement's text, the event's parameters from $first on.
std::string change_sql(const ChangeStatement& statement, std::size_t first)
{
    return fmt::format("WITH {}change AS ({}) {}SELECT {} FROM change RETURNING {}", statement.ctes, statement.change,
                       k_columns, event_placeholders(first, statement.message, statement.detail),
                       statement.returning);
}

} // namespace

pqxx::result record_event_with_change(pqxx::connection& conn, const ChangeStatement& statement,
                                      std::vector<std::optional<std::string>> params, const std::string& actor,
                                      const Event& event)
{
    const auto first = params.size() + 1;
    for (auto& value : event_values(actor, event)) {
        params.push_back(std::move(value));
    }
    return exec_autocommit_params(conn, statement.name, change_sql(statement, first), params);
}

void prepare_event_with_change(pqxx::connection& conn, const ChangeStatement& statement, std::size_t parameters)
{
    conn.prepare(statement.name, change_sql(statement, parameters + 1));
    conn.prepare_now(statement.name);
}

void record_event(pqxx::connection& conn, const std::string& actor, const Event& event) noexcept
{
    try {
        ride_out_transaction(conn, [&](pqxx::work& tx) {
            record_event(tx, actor, event);
        });
    } catch (const std::exception& e) {
        log::warn("event not recorded", {{"kind", event.kind}, {"error", e.what()}});
    }
}

} // namespace orch
