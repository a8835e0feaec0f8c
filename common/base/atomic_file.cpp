#include "common/base/atomic_file.hpp"

#include "common/base/errors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace orch {
namespace {

constexpr std::size_t k_buffer_bytes = 64 * 1024;

} // namespace

AtomicFile::AtomicFile(std::filesystem::path destination)
    : m_destination(std::move(destination)),
      m_temporary(m_destination.string() + ".tmp." + std::to_string(::getpid()))
{
    // O_TRUNC, not O_EXCL: a leftover of ours has our pid, so it is of a
    // process that died before it could rename; nobody else writes this name.
    m_fd.reset(::open(m_temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!m_fd) {
        throw_errno("open " + m_temporary.string());
    }
    m_buffer.reserve(k_buffer_bytes);
}

AtomicFile::~AtomicFile()
{
    if (!m_committed) {
        m_fd.reset();
        ::unlink(m_temporary.c_str());
    }
}

void AtomicFile::write(std::string_view bytes)
{
    if (m_buffer.size() + bytes.size() > k_buffer_bytes) {
        flush();
    }
    if (bytes.size() >= k_buffer_bytes) {
        m_buffer.assign(bytes);
        flush();
        return;
    }
    m_buffer.append(bytes);
}

void AtomicFile::flush()
{
    std::string_view rest(m_buffer);
    while (!rest.empty()) {
        const auto n = ::write(m_fd.get(), rest.data(), rest.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_errno("write " + m_temporary.string());
        }
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
    m_buffer.clear();
}

void AtomicFile::commit(bool durable)
{
    flush();
    if (durable && ::fsync(m_fd.get()) != 0) {
        throw_errno("fsync " + m_temporary.string());
    }
    if (::close(m_fd.release()) != 0) {
        throw_errno("close " + m_temporary.string());
    }
    if (::rename(m_temporary.c_str(), m_destination.c_str()) != 0) {
        throw_errno("rename " + m_temporary.string() + " to " + m_destination.string());
    }
    m_committed = true;
}

} // namespace orch
