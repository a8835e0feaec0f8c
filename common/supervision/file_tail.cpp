#include "common/supervision/file_tail.hpp"

#include "common/base/fd.hpp"
#include "common/supervision/log_bound.hpp"
#include "common/base/utf8.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

constexpr std::size_t k_pseudo_file_limit = 1 << 20;

} // namespace

std::string read_file_tail(const std::filesystem::path& path, std::size_t max_bytes)
{
    // Plain syscalls: called for both logs of every hook that ends (an empty
    // log costs open, fstat, one read, close).
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st{};
    if (!fd || ::fstat(fd.get(), &st) != 0) {
        return {};
    }
    std::string data;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        const auto size = static_cast<std::size_t>(st.st_size);
        auto start = size > max_bytes ? size - max_bytes : 0;
        // A bounded log (common/supervision/log_bound.hpp) reads as zeros where its oldest output
        // was deallocated: the tail starts at what it kept. Only a file with fewer
        // blocks than its size can have such a hole, so the others cost no lseek.
        if (static_cast<std::uint64_t>(st.st_blocks) * 512 < static_cast<std::uint64_t>(st.st_size)) {
            start = std::max(start, static_cast<std::size_t>(next_kept_offset(fd.get(), start)));
        }
        data.resize(size - start);
        std::size_t got = 0;
        while (got < data.size()) {
            const auto n = ::pread(fd.get(), data.data() + got, data.size() - got, static_cast<off_t>(start + got));
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            got += static_cast<std::size_t>(n);
        }
        data.resize(got);
    } else {
        // Empty, or a pseudo file (/proc, cgroupfs) that reports no size: read
        // it through, at most k_pseudo_file_limit (a device never keeps us here).
        char buf[4096];
        while (data.size() < k_pseudo_file_limit) {
            const auto n = ::read(fd.get(), buf, sizeof buf);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            data.append(buf, static_cast<std::size_t>(n));
        }
        if (data.size() > max_bytes) {
            data.erase(0, data.size() - max_bytes);
        }
    }
    // PostgreSQL text rejects NUL as well as ill-formed UTF-8.
    std::replace(data.begin(), data.end(), '\0', '?');
    return sanitize_utf8(data);
}

std::string read_log_tail(const std::filesystem::path& path, std::size_t max_bytes)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) {
        return {};
    }
    return read_file_tail(path, max_bytes);
}

} // namespace orch
