#include "common/supervision/log_bound.hpp"

#include "common/base/errors.hpp"
#include "common/base/fd.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {

std::uint64_t bound_log_file(const std::filesystem::path& path, std::uint64_t max_bytes)
{
    // Checked once per log per pass and per hook end, and nearly always within
    // its bound: one lstat decides, without opening the file.
    struct stat before{};
    if (::lstat(path.c_str(), &before) != 0 || !S_ISREG(before.st_mode) ||
        static_cast<std::uint64_t>(before.st_blocks) * 512 <= max_bytes ||
        static_cast<std::uint64_t>(before.st_size) <= max_bytes / 2) {
        return 0;
    }
    Fd fd{::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW)};
    if (!fd) {
        return 0;
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) {
        return 0;
    }
    // st_blocks counts what is really allocated, so a file already punched is not
    // punched again until new output accumulates.
    auto allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
    auto size = static_cast<std::uint64_t>(st.st_size);
    if (allocated <= max_bytes || size <= max_bytes / 2) {
        return 0;
    }
    // Keep the newest half of the budget; punch on block boundaries.
    constexpr std::uint64_t k_block = 4096;
    std::uint64_t end = (size - max_bytes / 2) / k_block * k_block;
    if (end == 0) {
        return 0;
    }
    if (::fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(end)) != 0) {
        return 0;
    }
    return end;
}

std::uint64_t next_kept_offset(int fd, std::uint64_t from)
{
    const off_t data = ::lseek(fd, static_cast<off_t>(from), SEEK_DATA);
    if (data >= 0) {
        return static_cast<std::uint64_t>(data);
    }
    if (errno == ENXIO) {
        // No data from `from` to the end: deallocated, or `from` is at the end already.
        const off_t end = ::lseek(fd, 0, SEEK_END);
        if (end < 0) {
            throw_errno("lseek SEEK_END");
        }
        return std::max(from, static_cast<std::uint64_t>(end));
    }
    if (errno == EINVAL) {
        return from; // no SEEK_DATA here: the whole file counts as data
    }
    throw_errno("lseek SEEK_DATA");
}

} // namespace orch
