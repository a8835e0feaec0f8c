#include "orchestrator/ops_commands.hpp"

#include "common/errors.hpp"
#include "common/ids.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

namespace orch {
namespace {

constexpr auto k_follow_poll = std::chrono::milliseconds(200);
constexpr const char* k_row_query = "SELECT status, stdout_path, stderr_path, stdout_tail, stderr_tail "
                                    "FROM process WHERE id = $1";
constexpr const char* k_status_query = "SELECT status FROM process WHERE id = $1";

// The start offset of the last `lines` lines of the file (a final newline ends the
// last line rather than starting an empty one).
std::streamoff tail_offset(std::ifstream& in, long lines)
{
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (lines <= 0) {
        return size;
    }
    std::streamoff pos = size;
    long seen = 0;
    char buf[4096];
    while (pos > 0) {
        auto chunk = std::min<std::streamoff>(pos, sizeof buf);
        pos -= chunk;
        in.seekg(pos);
        in.read(buf, chunk);
        for (auto i = chunk; i-- > 0;) {
            if (buf[i] == '\n' && pos + i != size - 1 && ++seen == lines) {
                return pos + i + 1;
            }
        }
    }
    return 0;
}

// Copies the file from `from` to its current end; returns the new offset.
std::streamoff copy_from(const std::string& path, std::streamoff from)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return from;
    }
    in.seekg(0, std::ios::end);
    auto size = static_cast<std::streamoff>(in.tellg());
    if (size < from) {
        from = 0; // truncated or replaced
    }
    in.seekg(from);
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        std::cout.write(buf, in.gcount());
        from += in.gcount();
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
    auto db = open_ops_database(options, false);
    auto& conn = db.conn();
    conn.prepare("logs_row", k_row_query);
    conn.prepare("logs_status", k_status_query);
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
    if (!path || !std::ifstream(*path)) {
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
    std::streamoff offset = 0;
    if (logs.lines) {
        std::ifstream in(*path, std::ios::binary);
        offset = tail_offset(in, *logs.lines);
    }
    offset = copy_from(*path, offset);
    if (!logs.follow) {
        return;
    }
    while (status != "exited") {
        std::this_thread::sleep_for(k_follow_poll);
        offset = copy_from(*path, offset);
        pqxx::read_transaction tx(conn);
        auto r = tx.exec_prepared("logs_status", id);
        status = r.empty() ? "exited" : r[0][0].as<std::string>();
    }
    copy_from(*path, offset); // what it wrote before it exited
}

} // namespace orch
