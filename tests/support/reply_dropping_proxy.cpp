#include "tests/support/reply_dropping_proxy.hpp"

#include "tests/support/pg_fixture.hpp"

#include <pqxx/pqxx>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

namespace orch::test {
namespace {

[[noreturn]] void fail(const char* what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

sockaddr_un unix_address(const std::string& path)
{
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        throw std::runtime_error("socket path too long: " + path);
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return addr;
}

// A connected socket to the server at `host` (a socket directory or a host
// name) and `port`; -1 when it cannot be reached.
int connect_upstream(const std::string& host, const std::string& port)
{
    if (!host.empty() && host.front() == '/') {
        const auto addr = unix_address(host + "/.s.PGSQL." + port);
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
            return fd;
        }
        if (fd >= 0) {
            ::close(fd);
        }
        return -1;
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.empty() ? "localhost" : host.c_str(), port.c_str(), &hints, &found) != 0) {
        return -1;
    }
    int fd = -1;
    for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(found);
    return fd;
}

bool write_all(int fd, const char* data, std::size_t size)
{
    while (size > 0) {
        const auto n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

std::uint32_t be32(const std::string& data, std::size_t at)
{
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        v = (v << 8) | static_cast<unsigned char>(data[at + i]);
    }
    return v;
}

// The NUL-terminated string at `at` in `body` (up to its end if unterminated);
// `at` moves past it.
std::string cstring(const std::string& body, std::size_t& at)
{
    if (at >= body.size()) {
        return {};
    }
    const auto end = body.find('\0', at);
    std::string out = body.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? body.size() : end + 1;
    return out;
}

// The request codes of the startup packets that another startup packet follows.
constexpr std::uint32_t k_ssl_request = 80877103;
constexpr std::uint32_t k_gssenc_request = 80877104;

} // namespace

ReplyDroppingProxy::ReplyDroppingProxy(const std::string& conninfo)
{
    {
        pqxx::connection probe(conninfo);
        m_upstream_host = probe.hostname() != nullptr ? probe.hostname() : "";
        m_upstream_port = probe.port() != nullptr ? probe.port() : "5432";
    }
    // No encryption: the proxy reads what goes through.
    m_url = with_conninfo_options(conninfo, {{"host", m_dir.path().string()},
                                             {"hostaddr", std::nullopt},
                                             {"port", m_upstream_port},
                                             {"sslmode", "disable"},
                                             {"gssencmode", "disable"}});
    const auto path = (m_dir / (".s.PGSQL." + m_upstream_port)).string();
    const auto addr = unix_address(path);
    m_listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m_listener < 0) {
        fail("socket");
    }
    if (::bind(m_listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(m_listener, 16) != 0) {
        const int err = errno;
        ::close(m_listener);
        throw std::system_error(err, std::generic_category(), "bind " + path);
    }
    if (::pipe2(m_wake, O_CLOEXEC) != 0) {
        const int err = errno;
        ::close(m_listener);
        throw std::system_error(err, std::generic_category(), "pipe2");
    }
    m_thread = std::thread([this] { run(); });
}

ReplyDroppingProxy::~ReplyDroppingProxy()
{
    [[maybe_unused]] auto n = ::write(m_wake[1], "x", 1);
    m_thread.join();
    ::close(m_wake[0]);
    ::close(m_wake[1]);
    ::close(m_listener);
}

struct ReplyDroppingProxy::Link {
    int client;
    int server;
    std::string pending;      // bytes from the client not yet seen as a whole message
    bool started = false;     // past the startup packet (which has no type byte)
    bool read_only = false;   // in a transaction begun READ ONLY
    bool drop_after_commit = false;
    bool drop_next_reply = false;
};

void ReplyDroppingProxy::arm_statement(const std::string& statement)
{
    std::lock_guard lock(m_mutex);
    m_arm = Arm::statement;
    m_statement = statement;
}

void ReplyDroppingProxy::arm_statement_commit(const std::string& statement)
{
    std::lock_guard lock(m_mutex);
    m_arm = Arm::statement_commit;
    m_statement = statement;
}

void ReplyDroppingProxy::arm_commit(int nth)
{
    std::lock_guard lock(m_mutex);
    m_arm = Arm::commit;
    m_commits_left = nth;
}

void ReplyDroppingProxy::disarm()
{
    std::lock_guard lock(m_mutex);
    m_arm = Arm::none;
}

std::vector<std::string> ReplyDroppingProxy::statements() const
{
    std::lock_guard lock(m_mutex);
    return m_statements;
}

void ReplyDroppingProxy::observe(Link& link)
{
    for (;;) {
        if (!link.started) {
            if (link.pending.size() < 8 || link.pending.size() < be32(link.pending, 0)) {
                return;
            }
            const auto code = be32(link.pending, 4);
            link.started = code != k_ssl_request && code != k_gssenc_request;
            link.pending.erase(0, be32(link.pending, 0));
            continue;
        }
        if (link.pending.size() < 5) {
            return;
        }
        const std::size_t size = 1 + be32(link.pending, 1);
        if (link.pending.size() < size) {
            return;
        }
        on_message(link, link.pending[0], link.pending.substr(5, size - 5));
        link.pending.erase(0, size);
    }
}

void ReplyDroppingProxy::on_message(Link& link, char type, const std::string& body)
{
    std::lock_guard lock(m_mutex);
    std::size_t at = 0;
    if (type == 'B') {
        cstring(body, at); // the portal
        const auto statement = cstring(body, at);
        if (statement.empty()) {
            return;
        }
        if (m_statement_set.insert(statement).second) {
            m_statements.push_back(statement);
        }
        if ((m_arm == Arm::statement || m_arm == Arm::statement_commit) && statement.rfind(m_statement, 0) == 0) {
            (m_arm == Arm::statement ? link.drop_next_reply : link.drop_after_commit) = true;
            m_arm = Arm::none;
        }
        return;
    }
    if (type != 'Q') {
        return;
    }
    const auto query = cstring(body, at);
    if (query.rfind("BEGIN", 0) == 0) {
        // libpqxx begins a read_transaction as "BEGIN; SET TRANSACTION READ ONLY".
        link.read_only = query.find("READ ONLY") != std::string::npos;
    } else if (query.rfind("COMMIT", 0) == 0 && std::exchange(link.read_only, false)) {
        return;
    } else if (query.rfind("COMMIT", 0) == 0) {
        ++m_commits;
        if (link.drop_after_commit) {
            link.drop_after_commit = false;
            link.drop_next_reply = true;
        } else if (m_arm == Arm::commit && --m_commits_left == 0) {
            link.drop_next_reply = true;
            m_arm = Arm::none;
        }
    }
}

void ReplyDroppingProxy::run()
{
    std::vector<Link> links;
    const auto close_link = [&links](std::size_t i) {
        ::close(links[i].client);
        ::close(links[i].server);
        links.erase(links.begin() + static_cast<std::ptrdiff_t>(i));
    };
    std::vector<char> buffer(64 * 1024);
    for (;;) {
        std::vector<pollfd> fds{{m_wake[0], POLLIN, 0}, {m_listener, POLLIN, 0}};
        for (const auto& l : links) {
            fds.push_back({l.client, POLLIN, 0});
            fds.push_back({l.server, POLLIN, 0});
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (fds[0].revents != 0) {
            break;
        }
        if (fds[1].revents & POLLIN) {
            const int client = ::accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (client >= 0) {
                const int upstream = connect_upstream(m_upstream_host, m_upstream_port);
                if (upstream < 0) {
                    ::close(client);
                } else {
                    links.push_back(Link{client, upstream});
                }
            }
            continue; // the links changed: poll again
        }
        for (std::size_t i = links.size(); i-- > 0;) {
            const auto from_client = fds[2 + 2 * i].revents;
            const auto from_server = fds[3 + 2 * i].revents;
            auto& link = links[i];
            if (from_client != 0) {
                const auto n = ::read(link.client, buffer.data(), buffer.size());
                if (n <= 0 || !write_all(link.server, buffer.data(), static_cast<std::size_t>(n))) {
                    close_link(i);
                    continue;
                }
                link.pending.append(buffer.data(), static_cast<std::size_t>(n));
                observe(link);
            }
            if (from_server != 0) {
                const auto n = ::read(link.server, buffer.data(), buffer.size());
                if (n > 0 && link.drop_next_reply) {
                    ++m_dropped;
                }
                if (n <= 0 || link.drop_next_reply ||
                    !write_all(link.client, buffer.data(), static_cast<std::size_t>(n))) {
                    close_link(i);
                }
            }
        }
    }
    for (auto& l : links) {
        ::close(l.client);
        ::close(l.server);
    }
}

} // namespace orch::test
