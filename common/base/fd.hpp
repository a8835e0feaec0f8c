#pragma once

#include <optional>
#include <string>
#include <utility>

namespace orch {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) noexcept : m_fd(fd) {}
    Fd(Fd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    Fd& operator=(Fd&& other) noexcept
    {
        if (this != &other) {
            reset(std::exchange(other.m_fd, -1));
        }
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }

    int get() const noexcept { return m_fd; }
    bool valid() const noexcept { return m_fd >= 0; }
    explicit operator bool() const noexcept { return valid(); }

    // Stops owning the descriptor and returns it; the caller must close it.
    int release() noexcept { return std::exchange(m_fd, -1); }
    // Closes the current descriptor (if any) and takes `fd`.
    void reset(int fd = -1) noexcept;

private:
    int m_fd = -1;
};

// The whole content of a small file (/proc, /sys), read with read(2); nullopt
// when it cannot be opened or a read fails (a /proc file of a process that
// exits meanwhile fails with ESRCH: an expected outcome here, where
// std::ifstream would throw from its buffer whatever its exception mask).
std::optional<std::string> read_whole_file(const std::string& path);

} // namespace orch
