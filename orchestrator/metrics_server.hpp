#pragma once

#include "common/base/fd.hpp"

#include <cstdint>
#include <netinet/in.h>
#include <functional>
#include <string>
#include <thread>

namespace orch {

// A minimal HTTP/1.1 server for Prometheus scrapes, on its own thread: answers
// GET (and HEAD) /metrics with `render()` as text/plain; version=0.0.4, 404 for
// other paths, 405 for other methods, 400 for a malformed request, 431 for a
// request head over 8 KiB; always `Connection: close`. Connections are served one
// at a time with non-blocking sockets under poll(), each bounded in time (a slow
// client is dropped), so a scrape can never stall the run loop.
// The address of "HOST:PORT" (IPv4 or localhost). Throws InvalidInput naming
// the value when it is not one; binds nothing.
sockaddr_in parse_metrics_listen(const std::string& listen);

class MetricsServer {
public:
    // `listen` is "HOST:PORT" with an IPv4 address or "localhost"; port 0 picks a
    // free port (see port()). Throws InvalidInput for a malformed address and
    // std::system_error when the socket cannot be bound.
    MetricsServer(const std::string& listen, std::function<std::string()> render);
    ~MetricsServer(); // stops the thread and closes the socket
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    std::uint16_t port() const { return m_port; }

private:
    void serve();
    void handle(int fd);

    std::function<std::string()> m_render;
    Fd m_listen;
    Fd m_wake; // eventfd: written by the destructor to stop serve()
    std::uint16_t m_port = 0;
    std::thread m_thread;
};

// The reply to one HTTP request head (exposed for tests): status line, headers, body.
std::string metrics_http_response(const std::string& request_head, const std::function<std::string()>& render);

} // namespace orch
