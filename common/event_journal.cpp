#include "common/event_journal.hpp"

#include "common/log.hpp"

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

void record_event(pqxx::transaction_base& tx, const std::string& actor, const Event& event)
{
    static const std::optional<std::string> user = os_user();
    tx.exec_params0("INSERT INTO event (kind, actor, os_user, machine_id, process_id, crawl_id, snapshot_id, "
                    " message, detail) "
                    "VALUES ($1, $2, $3, $4, $5::uuid, $6::uuid, $7::uuid, $8, $9::jsonb)",
                    event.kind, actor, user, event_machine_id(), event.process_id, event.crawl_id, event.snapshot_id,
                    event.message, event.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void record_event(pqxx::connection& conn, const std::string& actor, const Event& event) noexcept
{
    try {
        pqxx::work tx(conn);
        record_event(tx, actor, event);
        tx.commit();
    } catch (const std::exception& e) {
        log::warn("event not recorded", {{"kind", event.kind}, {"error", e.what()}});
    }
}

} // namespace orch
