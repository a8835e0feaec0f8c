#include "common/hooks/output_files.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/base/utf8.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

struct DirCloser {
    void operator()(DIR* d) const noexcept { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

struct Frame {
    DirPtr dir;
    std::string rel;  // "" for the root
};

bool ends_with(std::string_view s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Takes ownership of `fd` whatever happens.
DirPtr open_dir_stream(int fd)
{
    DIR* d = ::fdopendir(fd);
    if (!d) {
        int saved = errno;
        ::close(fd);
        errno = saved;
    }
    return DirPtr(d);
}

void warn_skip(const std::string& rel, const char* why)
{
    log::warn("output files: entry skipped", {{"path", sanitize_utf8(rel)}, {"reason", why}});
}

} // namespace

bool is_worker_file_name(std::string_view name)
{
    return ends_with(name, ".stdout.log") || ends_with(name, ".stderr.log") || ends_with(name, ".cmd.sh");
}

nlohmann::json OutputFiles::to_json() const
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : files) {
        out.push_back({{"path", sanitize_utf8(f.path)}, {"size", f.size}});
    }
    return out;
}

OutputFiles list_output_files(const std::filesystem::path& dir, std::size_t max_files)
{
    // O_NOFOLLOW on every open: the hook may still have replaced a directory by
    // a symlink to "/" before we got here, and must not make us list it.
    int root_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root_fd < 0) {
        throw_errno("open output directory " + dir.string());
    }
    std::vector<Frame> stack;
    stack.push_back(Frame{open_dir_stream(root_fd), ""});
    if (!stack.back().dir) {
        throw_errno("fdopendir " + dir.string());
    }

    OutputFiles out;
    while (!stack.empty() && !out.truncated) {
        Frame& top = stack.back();
        errno = 0;
        dirent* entry = ::readdir(top.dir.get());
        if (!entry) {
            if (errno != 0) {
                warn_skip(top.rel, std::strerror(errno));
            }
            stack.pop_back();
            continue;
        }
        std::string_view name = entry->d_name;
        if (name == "." || name == "..") {
            continue;
        }
        // The directory's own type field spares a stat of what is never listed:
        // the worker's logs and cmd.sh (each hook's scan would otherwise stat
        // every earlier hook's three files: quadratic in the hooks of a plugin),
        // symlinks and special files. A file's size still needs its stat.
        const unsigned char type = entry->d_type;
        const bool top_level = top.rel.empty();
        if (type != DT_UNKNOWN && type != DT_DIR && type != DT_REG) {
            continue;
        }
        if (top_level && type == DT_REG && is_worker_file_name(name)) {
            continue;
        }
        int parent_fd = ::dirfd(top.dir.get());
        std::string rel = top_level ? std::string(name) : top.rel + "/" + std::string(name);
        struct stat st {};
        if (type == DT_DIR) {
            st.st_mode = S_IFDIR; // O_NOFOLLOW below still refuses a swapped-in symlink
        } else if (::fstatat(parent_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            warn_skip(rel, std::strerror(errno));
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (stack.size() >= k_max_output_dir_depth) {
                warn_skip(rel, "directory nesting too deep");
                continue;
            }
            int fd = ::openat(parent_fd, entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DirPtr sub = fd >= 0 ? open_dir_stream(fd) : nullptr;
            if (!sub) {
                warn_skip(rel, std::strerror(errno));
                continue;
            }
            stack.push_back(Frame{std::move(sub), std::move(rel)}); // invalidates `top`
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            continue;
        }
        if (top_level && is_worker_file_name(name)) {
            continue;
        }
        if (out.files.size() >= max_files) {
            out.truncated = true;
            log::warn("output files: listing truncated", {{"dir", dir.string()}, {"max", std::to_string(max_files)}});
            break;
        }
        out.files.push_back(OutputFile{std::move(rel), static_cast<std::uint64_t>(st.st_size)});
        out.total_size += static_cast<std::uint64_t>(st.st_size);
    }
    std::sort(out.files.begin(), out.files.end(),
              [](const OutputFile& a, const OutputFile& b) { return a.path < b.path; });
    return out;
}

} // namespace orch
