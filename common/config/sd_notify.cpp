#include "common/config/sd_notify.hpp"

#include "common/base/fd.hpp"
#include "common/base/log.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

namespace orch {

void sd_notify(const std::string& state)
{
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (path == nullptr || *path == '\0') {
        return;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::size_t len = std::strlen(path);
    if (len >= sizeof addr.sun_path) {
        log::warn("NOTIFY_SOCKET path too long", {{"path", path}});
        return;
    }
    std::memcpy(addr.sun_path, path, len);
    if (path[0] == '@') {
        addr.sun_path[0] = '\0'; // abstract namespace
    }
    Fd fd{::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    if (!fd) {
        return;
    }
    auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
    if (::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), addr_len) < 0) {
        log::warn("sd_notify failed", {{"state", state}, {"error", std::strerror(errno)}});
    }
}

} // namespace orch
