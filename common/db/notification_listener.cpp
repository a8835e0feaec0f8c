#include "common/db/notification_listener.hpp"

#include "common/db/database_outage.hpp"

#include <cstdlib>
#include <filesystem>

namespace orch {

class NotificationListener::Receiver : public pqxx::notification_receiver {
public:
    Receiver(pqxx::connection& conn, const std::string& channel) : pqxx::notification_receiver(conn, channel) {}
    void operator()(const std::string& payload, int /*backend_pid*/) override { m_payloads.push_back(payload); }
    std::vector<std::string> m_payloads;
};

NotificationListener::NotificationListener(pqxx::connection& conn, const std::string& channel)
    : m_conn(conn), m_receiver(std::make_unique<Receiver>(conn, channel)), m_sink(&m_receiver->m_payloads)
{
}

NotificationListener::~NotificationListener() = default;

int NotificationListener::fd() const
{
    return m_conn.sock();
}

std::vector<std::string> NotificationListener::drain()
{
    // Where a loop meets a server restart first: its socket turns readable at once.
    // Once the connection is back, libpqxx has LISTENed again; what was notified
    // meanwhile is lost, and notifications are only hints (listeners re-read).
    ride_out(m_conn, [this] { return m_conn.get_notifs(); });
    std::vector<std::string> out;
    out.swap(*m_sink);
    return out;
}

std::string sibling_executable(const std::string& name)
{
    if (const char* dir = std::getenv("ORCH_BIN_DIR"); dir != nullptr && *dir != '\0') {
        return (std::filesystem::path(dir) / name).string();
    }
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        return name;
    }
    return (self.parent_path() / name).string();
}

} // namespace orch
