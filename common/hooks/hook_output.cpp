#include "common/hooks/hook_output.hpp"

#include "common/base/bounded_json.hpp"
#include "common/base/errors.hpp"
#include "common/base/fd.hpp"
#include "common/base/utf8.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace orch {
namespace {

constexpr std::size_t k_max_discovered_total_bytes = 16 * 1024 * 1024;
constexpr std::size_t k_quoted_bytes = 80;

std::string_view trim_left(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\f' ||
                          s.front() == '\v')) {
        s.remove_prefix(1);
    }
    return s;
}

bool claims_record(std::string_view line)
{
    line = trim_left(line);
    return !line.empty() && line.front() == '{' && line.find("\"type\"") != std::string_view::npos;
}

// For quoting hook-supplied text in messages that end up in logs and rows.
std::string quote(std::string_view s)
{
    std::string out = sanitize_utf8(s.substr(0, k_quoted_bytes));
    return s.size() > k_quoted_bytes ? "\"" + out + "...\"" : "\"" + out + "\"";
}

bool is_status(const std::string& s)
{
    return s == "succeeded" || s == "failed" || s == "skipped" || s == "noresults";
}

} // namespace

void HookOutputParser::feed(std::string_view bytes)
{
    while (!bytes.empty()) {
        std::size_t nl = bytes.find('\n');
        std::string_view piece = bytes.substr(0, nl);
        if (!m_overlong) {
            // Only the part that still fits is buffered; beyond the limit we keep
            // just the verdict on the prefix and drop bytes until the newline.
            if (m_line.size() + piece.size() > k_max_record_line_bytes) {
                m_line.append(piece.substr(0, k_max_record_line_bytes + 1 - m_line.size()));
                m_overlong = true;
                m_overlong_claims_record = claims_record(m_line);
                std::string().swap(m_line);
            } else {
                m_line.append(piece);
            }
        }
        if (nl == std::string_view::npos) {
            return;
        }
        end_line();
        bytes.remove_prefix(nl + 1);
    }
}

HookOutput HookOutputParser::finish()
{
    if (!m_line.empty() || m_overlong) {
        end_line();
    }
    m_out.lines = m_line_no;
    if (m_out.archive_result_count > 1) {
        std::string lines;
        for (std::size_t i = 0; i < m_archive_result_lines.size() && i < 10; ++i) {
            lines += fmt::format("{}{}", i ? ", " : "", m_archive_result_lines[i]);
        }
        error(fmt::format("hook printed {} ArchiveResult records (lines {}{})", m_out.archive_result_count, lines,
                          m_archive_result_lines.size() > 10 ? ", ..." : ""));
    }
    return std::move(m_out);
}

void HookOutputParser::end_line()
{
    ++m_line_no;
    if (m_overlong) {
        if (m_overlong_claims_record) {
            error(fmt::format("line {}: record longer than {} bytes", m_line_no, k_max_record_line_bytes));
        } else {
            note(fmt::format("line {}: longer than {} bytes, skipped", m_line_no, k_max_record_line_bytes));
        }
    } else {
        std::string_view line = m_line;
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        handle_line(line);
    }
    m_line.clear();
    m_overlong = false;
    m_overlong_claims_record = false;
}

void HookOutputParser::handle_line(std::string_view line)
{
    std::string_view text = trim_left(line);
    if (text.empty() || text.front() != '{') {
        return;
    }
    nlohmann::json record;
    try {
        record = parse_bounded_json(text);
    } catch (const JsonInputError& e) {
        if (claims_record(text)) {
            error(fmt::format("line {}: invalid JSON in record: {}", m_line_no, e.what()));
        }
        return;
    }
    if (!record.is_object()) {
        return;
    }
    auto type = record.find("type");
    if (type == record.end()) {
        return;
    }
    if (!type->is_string()) {
        note(fmt::format("line {}: \"type\" is not a string; line ignored", m_line_no));
        return;
    }
    const auto& name = type->get_ref<const std::string&>();
    if (name == "ArchiveResult") {
        handle_archive_result(record);
    } else if (name == "Snapshot") {
        handle_snapshot(record);
    } else {
        note(fmt::format("line {}: ignored record of unknown type {}", m_line_no, quote(name)));
    }
}

void HookOutputParser::handle_archive_result(const nlohmann::json& record)
{
    ++m_out.archive_result_count;
    m_archive_result_lines.push_back(m_line_no);
    if (m_out.archive_result_count > 1) {
        return; // reported once, in finish()
    }
    ArchiveResultRecord ar;
    ar.line = m_line_no;
    auto status = record.find("status");
    if (status == record.end() || !status->is_string() || !is_status(status->get<std::string>())) {
        error(fmt::format("line {}: ArchiveResult \"status\" must be one of succeeded, failed, skipped, "
                          "noresults; got {}",
                          m_line_no, status == record.end() ? std::string("nothing") : quote(status->dump())));
        return;
    }
    ar.status = status->get<std::string>();
    for (const char* key : {"output_str", "error"}) {
        auto it = record.find(key);
        if (it == record.end() || it->is_null()) {
            continue;
        }
        if (!it->is_string()) {
            error(fmt::format("line {}: ArchiveResult \"{}\" must be a string, got {}", m_line_no, key,
                              it->type_name()));
            return;
        }
        (std::string_view(key) == "error" ? ar.error : ar.output_str) = it->get<std::string>();
    }
    if (auto it = record.find("output_json"); it != record.end()) {
        ar.output_json = *it;
    }
    m_out.archive_result = std::move(ar);
}

void HookOutputParser::handle_snapshot(const nlohmann::json& record)
{
    std::optional<std::string> title;
    if (auto it = record.find("title"); it != record.end() && !it->is_null()) {
        if (!it->is_string()) {
            note(fmt::format("line {}: Snapshot \"title\" is not a string; title ignored", m_line_no));
        } else if (it->get_ref<const std::string&>().size() > k_max_title_bytes) {
            note(fmt::format("line {}: Snapshot title longer than {} bytes; title ignored", m_line_no,
                             k_max_title_bytes));
        } else {
            title = it->get<std::string>();
        }
    }
    auto url = record.find("url");
    if (url == record.end() || url->is_null()) {
        if (title) {
            m_out.title = std::move(title);
        }
        return;
    }
    if (!url->is_string() || url->get_ref<const std::string&>().empty()) {
        note(fmt::format("line {}: Snapshot \"url\" is not a non-empty string; record ignored", m_line_no));
        return;
    }
    const auto& text = url->get_ref<const std::string&>();
    if (text.size() > k_max_discovered_url_bytes) {
        note(fmt::format("line {}: Snapshot url longer than {} bytes; record ignored", m_line_no,
                         k_max_discovered_url_bytes));
        return;
    }
    std::size_t cost = text.size() + (title ? title->size() : 0);
    if (m_out.discovered.size() >= k_max_discovered_urls || m_discovered_bytes + cost > k_max_discovered_total_bytes) {
        if (m_out.discovered_dropped++ == 0) {
            note(fmt::format("line {}: discovered-URL limit reached ({} kept); the rest are dropped", m_line_no,
                             m_out.discovered.size()));
        }
        return;
    }
    m_discovered_bytes += cost;
    m_out.discovered.push_back(DiscoveredUrl{text, std::move(title), m_line_no});
}

void HookOutputParser::error(std::string text)
{
    if (m_out.errors.size() < k_max_output_messages) {
        m_out.errors.push_back(std::move(text));
    } else {
        ++m_out.errors_dropped;
    }
}

void HookOutputParser::note(std::string text)
{
    if (m_out.notes.size() < k_max_output_messages) {
        m_out.notes.push_back(std::move(text));
    } else {
        ++m_out.notes_dropped;
    }
}

HookOutput parse_hook_output_file(const std::filesystem::path& path)
{
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        throw_errno("open " + path.string());
    }
    HookOutputParser parser;
    std::array<char, 65536> buf;
    for (;;) {
        ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw_errno("read " + path.string());
        }
        if (n == 0) {
            break;
        }
        parser.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }
    return parser.finish();
}

} // namespace orch
