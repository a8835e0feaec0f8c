#include "orchestrator/metrics_server.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t k_max_request_head = 8192;
constexpr auto k_read_timeout = std::chrono::seconds(2);
constexpr auto k_write_timeout = std::chrono::seconds(5);

std::string reply(const char* status, const std::string& body, const std::string& extra_headers = {},
                  bool head_only = false, const char* type = "text/plain; charset=utf-8")
{
    return fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}",
                       status, type, body.size(), extra_headers, head_only ? "" : body);
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Clock::time_point deadline)
{
    for (;;) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (ms <= 0) {
            return false;
        }
        pollfd p{fd, events, 0};
        int rc = ::poll(&p, 1, static_cast<int>(ms));
        if (rc > 0) {
            return true;
        }
        if (rc < 0 && errno != EINTR) {
            return false;
        }
    }
}

} // namespace

std::string metrics_http_response(const std::string& request_head, const std::function<std::string()>& render)
{
    auto line_end = request_head.find("\r\n");
    if (line_end == std::string::npos) {
        line_end = request_head.find('\n');
    }
    auto line = request_head.substr(0, line_end);
    auto sp1 = line.find(' ');
    auto sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 7, "HTTP/1.") != 0 ||
        line.find(' ', sp2 + 1) != std::string::npos) {
        return reply("400 Bad Request", "bad request\n");
    }
    auto method = line.substr(0, sp1);
    auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    target = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") {
        return reply("405 Method Not Allowed", "only GET\n", "Allow: GET, HEAD\r\n");
    }
    if (target != "/metrics") {
        return reply("404 Not Found", "not found; metrics are at /metrics\n", {}, method == "HEAD");
    }
    return reply("200 OK", render(), {}, method == "HEAD", "text/plain; version=0.0.4; charset=utf-8");
}

sockaddr_in parse_metrics_listen(const std::string& listen)
{
    auto colon = listen.rfind(':');
    std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
    int port = -1;
    if (colon != std::string::npos) {
        auto digits = listen.substr(colon + 1);
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
            port = -1;
        }
    }
    if (host == "localhost") {
        host = "127.0.0.1";
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (port < 0 || port > 65535 || ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
        throw InvalidInput(fmt::format("--metrics-listen '{}': expected IPV4_ADDRESS:PORT, e.g. 127.0.0.1:9464",
                                       listen));
    }
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    return addr;
}

MetricsServer::MetricsServer(const std::string& listen, std::function<std::string()> render)
    : m_render(std::move(render))
{
    sockaddr_in addr = parse_metrics_listen(listen);
    m_listen = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!m_listen) {
        throw_errno("socket");
    }
    int one = 1;
    ::setsockopt(m_listen.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(m_listen.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        throw_errno(fmt::format("bind {}", listen));
    }
    if (::listen(m_listen.get(), 16) != 0) {
        throw_errno("listen");
    }
    socklen_t len = sizeof addr;
    if (::getsockname(m_listen.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        throw_errno("getsockname");
    }
    m_port = ntohs(addr.sin_port);
    m_wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!m_wake) {
        throw_errno("eventfd");
    }
    m_thread = std::thread([this] { serve(); });
}

MetricsServer::~MetricsServer()
{
    std::uint64_t one = 1;
    ssize_t ignored = ::write(m_wake.get(), &one, sizeof one);
    (void)ignored;
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

void MetricsServer::serve()
{
    for (;;) {
        pollfd fds[2] = {{m_listen.get(), POLLIN, 0}, {m_wake.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            log::error("metrics server: poll failed; no more scrapes", {{"errno", std::to_string(errno)}});
            return;
        }
        if (fds[1].revents != 0) {
            return;
        }
        Fd conn(::accept4(m_listen.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (conn) {
            try {
                handle(conn.get());
            } catch (const std::exception& e) {
                log::warn("metrics scrape failed", {{"error", e.what()}});
            }
        }
    }
}

void MetricsServer::handle(int fd)
{
    std::string head;
    auto deadline = Clock::now() + k_read_timeout;
    std::string response;
    while (response.empty()) {
        if (head.find("\r\n\r\n") != std::string::npos || head.find("\n\n") != std::string::npos) {
            response = metrics_http_response(head, m_render);
            break;
        }
        if (head.size() > k_max_request_head) {
            response = reply("431 Request Header Fields Too Large", "request too large\n");
            break;
        }
        if (!wait_ready(fd, POLLIN, deadline)) {
            return; // too slow: drop it
        }
        char buf[2048];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            return;
        }
        if (n > 0) {
            head.append(buf, static_cast<std::size_t>(n));
        }
    }
    deadline = Clock::now() + k_write_timeout;
    std::size_t sent = 0;
    while (sent < response.size()) {
        ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_ready(fd, POLLOUT, deadline)) {
                return;
            }
        } else {
            return;
        }
    }
    ::shutdown(fd, SHUT_WR);
}

} // namespace orch
