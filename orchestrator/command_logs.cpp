#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/base/errors.hpp"
#include "common/base/fd.hpp"
#include "common/base/ids.hpp"
#include "common/supervision/log_bound.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

constexpr auto k_follow_poll = std::chrono::milliseconds(200);
constexpr const char* k_row_query = "SELECT status, stdout_path, stderr_path, stdout_tail, stderr_tail "
                                    "FROM process WHERE id = $1";
constexpr const char* k_status_query = "SELECT status FROM process WHERE id = $1";

// Reads up to `size` bytes at `offset`; fewer only at the end of the file.
std::size_t read_at(int fd, char* buf, std::size_t size, std::uint64_t offset, const std::string& path)
{
    std::size_t got = 0;
    while (got < size) {
        const ssize_t n = ::pread(fd, buf + got, size - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw_errno("read " + path);
        }
        if (n == 0) {
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    return got;
}

// The start offset of the last `lines` lines of the file (a final newline ends the
// last line rather than starting an empty one), or 0 when the part it kept holds
// fewer: the scan stops where a log bound deallocated the older output (zeros
// hold no line, and reading gigabytes of them would take minutes).
std::uint64_t tail_offset(const std::string& path, long lines)
{
    Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    struct stat st{};
    if (!fd || ::fstat(fd.get(), &st) != 0) {
        return 0;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (lines <= 0) {
        return size;
    }
    const std::uint64_t kept = next_kept_offset(fd.get(), 0);
    std::uint64_t pos = size;
    long seen = 0;
    char buf[4096];
    while (pos > kept) {
        const auto chunk = std::min<std::uint64_t>(pos - kept, sizeof buf);
        pos -= chunk;
        const auto got = read_at(fd.get(), buf, chunk, pos, path);
        for (auto i = got; i-- > 0;) {
            if (buf[i] == '\n' && pos + i != size - 1 && ++seen == lines) {
                return pos + i + 1;
            }
        }
    }
    return 0;
}

// Copies the file from `from` to its current end on stdout; returns the new
// offset. What a log bound deallocated (HOOK_LOG_MAX_BYTES, common/supervision/log_bound.hpp)
// reads as zeros in a file that keeps its size: it is skipped and its length said
// on stderr, so that stdout carries the kept output and nothing else.
std::uint64_t copy_from(const std::string& path, std::uint64_t from, const char* stream)
{
    Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    struct stat st{};
    if (!fd || ::fstat(fd.get(), &st) != 0) {
        return from;
    }
    if (static_cast<std::uint64_t>(st.st_size) < from) {
        from = 0; // truncated or replaced
    }
    char buf[65536];
    for (;;) {
        // Checked before every chunk: a bound may deallocate more while we read.
        const auto kept = next_kept_offset(fd.get(), from);
        if (kept > from) {
            std::cout.flush();
            std::fprintf(stderr, "orchestrator: [%llu bytes of older %s output discarded: the log is bounded by "
                                 "HOOK_LOG_MAX_BYTES]\n",
                         static_cast<unsigned long long>(kept - from), stream);
            from = kept;
        }
        const auto got = read_at(fd.get(), buf, sizeof buf, from, path);
        if (got == 0) {
            break;
        }
        std::cout.write(buf, static_cast<std::streamsize>(got));
        from += got;
    }
    std::cout.flush();
    return from;
}

std::string tail_lines(const std::string& text, long lines)
{
    if (lines <= 0) {
        return "";
    }
    long seen = 0;
    for (auto i = text.size(); i-- > 0;) {
        if (text[i] == '\n' && i != text.size() - 1 && ++seen == lines) {
            return text.substr(i + 1);
        }
    }
    return text;
}

} // namespace

void command_logs(const CommonOptions& options, const LogsOptions& logs)
{
    auto id = require_uuid(logs.process_id, "process id");
    OpsSession session(options, OpsSession::Schema::current,
                       {{"logs_row", k_row_query}, {"logs_status", k_status_query}});
    auto& conn = session.conn();
    std::string status;
    std::optional<std::string> path;
    std::optional<std::string> stored_tail;
    {
        pqxx::read_transaction tx(conn);
        auto r = tx.exec_prepared("logs_row", id);
        if (r.empty()) {
            throw NotFound(fmt::format("process {} not found", id));
        }
        status = r[0][0].as<std::string>();
        int col = logs.stderr_log ? 2 : 1;
        if (!r[0][col].is_null()) {
            path = r[0][col].as<std::string>();
        }
        if (!r[0][col + 2].is_null()) {
            stored_tail = r[0][col + 2].as<std::string>();
        }
    }
    const char* stream = logs.stderr_log ? "stderr" : "stdout";
    if (!path || !Fd{::open(path->c_str(), O_RDONLY | O_CLOEXEC)}) {
        if (stored_tail) {
            // The file is gone (pruned, or another machine's): the row keeps the end of it.
            std::fprintf(stderr, "orchestrator: the %s log file of process %s is not readable here; "
                                 "printing the tail stored in its row\n", stream, id.c_str());
            std::cout << (logs.lines ? tail_lines(*stored_tail, *logs.lines) : *stored_tail) << std::flush;
            return;
        }
        throw NotFound(path ? fmt::format("the {} log of process {} ({}) does not exist", stream, id, *path)
                            : fmt::format("process {} has no {} log recorded", id, stream));
    }
    std::uint64_t offset = logs.lines ? tail_offset(*path, *logs.lines) : 0;
    offset = copy_from(*path, offset, stream);
    if (!logs.follow) {
        return;
    }
    while (status != "exited") {
        std::this_thread::sleep_for(k_follow_poll);
        offset = copy_from(*path, offset, stream);
        pqxx::read_transaction tx(conn);
        auto r = tx.exec_prepared("logs_status", id);
        status = r.empty() ? "exited" : r[0][0].as<std::string>();
    }
    copy_from(*path, offset, stream); // what it wrote before it exited
}

} // namespace orch
