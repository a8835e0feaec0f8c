#include "tests/ops/http_exchange.hpp"

#include "common/base/fd.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <sstream>

namespace orch::test {

std::string http_exchange(std::uint16_t port, const std::string& request)
{
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        return {};
    }
    for (std::size_t sent = 0; sent < request.size();) {
        auto n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            break; // the server may close early (a request too large)
        }
        sent += static_cast<std::size_t>(n);
    }
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0;) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}

std::string scrape_metrics(std::uint16_t port)
{
    return http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

int metrics_port_in_log(const std::string& json_log)
{
    std::istringstream lines(json_log);
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.value("msg", "") == "metrics listening") {
            return std::stoi(j["port"].get<std::string>());
        }
    }
    return 0;
}

} // namespace orch::test
