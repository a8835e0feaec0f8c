#include "common/archive/gzip_members.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace orch {
namespace {

constexpr std::size_t k_block = 1 << 16;
// 16 + MAX_WBITS: a gzip header and trailer, not a raw or zlib stream.
constexpr int k_gzip_window = 16 + MAX_WBITS;

} // namespace

GzipMembers::GzipMembers(const std::filesystem::path& file, std::size_t head_limit)
    : m_file(file), m_fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC)), m_head_limit(head_limit), m_in(k_block),
      m_out(k_block)
{
    if (!m_fd) {
        throw_errno("open " + file.string());
    }
    if (inflateInit2(&m_zs, k_gzip_window) != Z_OK) {
        throw std::runtime_error("zlib: cannot start an inflate stream");
    }
    m_zs.next_in = m_in.data();
    m_zs.avail_in = 0;
}

GzipMembers::~GzipMembers()
{
    inflateEnd(&m_zs);
}

bool GzipMembers::fill()
{
    if (m_eof) {
        return false;
    }
    for (;;) {
        const auto n = ::read(m_fd.get(), m_in.data(), m_in.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_errno("read " + m_file.string());
        }
        if (n == 0) {
            m_eof = true;
            return false;
        }
        m_read += static_cast<std::uint64_t>(n);
        m_zs.next_in = m_in.data();
        m_zs.avail_in = static_cast<uInt>(n);
        return true;
    }
}

std::optional<GzipMember> GzipMembers::next()
{
    if (m_done) {
        return std::nullopt;
    }
    if (m_zs.avail_in == 0 && !fill()) {
        m_done = true;  // a clean end: nothing after the last member
        return std::nullopt;
    }
    GzipMember member;
    member.offset = m_read - m_zs.avail_in;
    if (inflateReset(&m_zs) != Z_OK) {
        throw std::runtime_error("zlib: cannot reset the inflate stream");
    }
    for (;;) {
        if (m_zs.avail_in == 0 && !fill()) {
            m_done = true;
            m_problem = fmt::format("{}: the gzip member at offset {} is cut short after {} bytes (the writer was "
                                    "stopped mid-record?); indexed up to the record before it",
                                    m_file.string(), member.offset, m_read - member.offset);
            return std::nullopt;
        }
        m_zs.next_out = m_out.data();
        m_zs.avail_out = static_cast<uInt>(m_out.size());
        const int rc = inflate(&m_zs, Z_NO_FLUSH);
        const auto produced = m_out.size() - m_zs.avail_out;
        if (member.head.size() < m_head_limit) {
            member.head.append(reinterpret_cast<const char*>(m_out.data()),
                               std::min(produced, m_head_limit - member.head.size()));
        }
        member.inflated_size += produced;
        if (rc == Z_STREAM_END) {
            member.length = m_read - m_zs.avail_in - member.offset;
            return member;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            m_done = true;
            m_problem = fmt::format("{}: not gzip data at offset {} ({}); indexed up to the record before it",
                                    m_file.string(), member.offset, m_zs.msg ? m_zs.msg : "inflate error");
            return std::nullopt;
        }
    }
}

} // namespace orch
