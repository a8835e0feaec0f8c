#pragma once

#include <pqxx/pqxx>

#include <memory>
#include <string>
#include <vector>

namespace orch {

// LISTENs on one channel of a connection and collects payloads. Notifications are
// hints: listeners re-read the tables. Poll fd() for readability, then call
// drain(). Not thread-safe; the connection must outlive the listener.
class NotificationListener {
public:
    NotificationListener(pqxx::connection& conn, const std::string& channel);
    ~NotificationListener();
    NotificationListener(const NotificationListener&) = delete;
    NotificationListener& operator=(const NotificationListener&) = delete;

    // The connection's socket (shared by every listener of the connection).
    int fd() const;
    // Reads what arrived (non-blocking) and returns the payloads for this channel.
    std::vector<std::string> drain();

private:
    class Receiver;
    pqxx::connection& m_conn;
    std::unique_ptr<Receiver> m_receiver;
    std::vector<std::string>* m_sink;
};

// Path of one of our executables: $ORCH_BIN_DIR/<name>, else beside /proc/self/exe.
std::string sibling_executable(const std::string& name);

} // namespace orch
