#pragma once

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

} // namespace orch
