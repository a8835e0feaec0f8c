#pragma once

#include "tests/support/scratch_dir.hpp"

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace orch::test {

// A transparent proxy between libpq clients and a PostgreSQL server, on a Unix
// socket of its own, that can lose one reply. It reads the messages clients send
// (the frontend protocol: Bind names a prepared statement, Query carries a simple
// query such as COMMIT; the COMMITs of transactions begun READ ONLY, which
// commit nothing and which a crawl sends as often as it polls, are not
// counted) and, once armed, closes the connection of the client that
// sent the chosen message when the server's first bytes after it arrive, without
// passing them on. By then the server has run the message: a statement in
// autocommit, or a COMMIT, has committed. The client sees its connection break
// with the commit in doubt, as when a server dies between a commit and its reply.
//
// Owns a thread that accepts and forwards; joined on destruction, which closes
// every connection. Throws std::system_error when its socket cannot be set up,
// what libpqxx throws when the server cannot be reached.
class ReplyDroppingProxy {
public:
    // Forwards to the server of `conninfo` (key=value or URI; its Unix socket or
    // TCP address and port, as libpq resolves them).
    explicit ReplyDroppingProxy(const std::string& conninfo);
    ~ReplyDroppingProxy();
    ReplyDroppingProxy(const ReplyDroppingProxy&) = delete;
    ReplyDroppingProxy& operator=(const ReplyDroppingProxy&) = delete;

    // A key=value connection string for `conninfo`'s database through the proxy.
    const std::string& url() const { return m_url; }

    // Each arm replaces the previous one and fires once.
    // The reply to the next Bind, by any client, of a prepared statement whose
    // name starts with `statement`.
    void arm_statement(const std::string& statement);
    // The reply to the first COMMIT that the client sends after its next Bind
    // of such a statement: the commit of the statement's transaction.
    void arm_statement_commit(const std::string& statement);
    // The reply to the nth COMMIT (1: the next one) sent from now on, by any client.
    void arm_commit(int nth);
    void disarm();

    // Replies dropped so far.
    int dropped() const { return m_dropped.load(); }
    // What clients sent so far: the names of the prepared statements they bound
    // (each once, in the order of first use), and how many COMMITs.
    std::vector<std::string> statements() const;
    int commits() const { return m_commits.load(); }

private:
    struct Link;
    enum class Arm { none, statement, statement_commit, commit };
    void run();
    // Looks at the whole messages in link.pending (bytes the client sent).
    void observe(Link& link);
    void on_message(Link& link, char type, const std::string& body);

    ScratchDir m_dir{"proxy"};
    std::string m_upstream_host;
    std::string m_upstream_port;
    std::string m_url;
    int m_listener = -1;
    int m_wake[2] = {-1, -1};
    mutable std::mutex m_mutex; // guards the arm and the statements seen
    Arm m_arm = Arm::none;
    std::string m_statement;
    int m_commits_left = 0;
    std::vector<std::string> m_statements;
    std::set<std::string> m_statement_set;
    std::atomic<int> m_dropped{0};
    std::atomic<int> m_commits{0};
    std::thread m_thread;
};

} // namespace orch::test
