#include "common/archive/warc_record.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace orch {
namespace {

std::string lower(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

bool has_prefix(std::string_view text, std::string_view prefix)
{
    return text.substr(0, prefix.size()) == prefix;
}

std::string_view trim(std::string_view text)
{
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    return text;
}

// Header lines from `block` (lines end in CRLF; a bare LF is accepted, as some
// writers use it) into `fields`, names lowercased, the first of repeats kept.
void parse_fields(std::string_view block, std::map<std::string, std::string>& fields)
{
    while (!block.empty()) {
        const auto eol = block.find('\n');
        auto line = block.substr(0, eol);
        block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 1);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) {
            continue;
        }
        fields.emplace(lower(trim(line.substr(0, colon))), std::string(trim(line.substr(colon + 1))));
    }
}

// The end of a header block starting at `from`: the offset just after its
// blank line, or npos.
std::size_t header_end(std::string_view text, std::size_t from)
{
    const auto crlf = text.find("\r\n\r\n", from);
    const auto lf = text.find("\n\n", from);
    if (crlf == std::string_view::npos && lf == std::string_view::npos) {
        return std::string_view::npos;
    }
    if (lf == std::string_view::npos || (crlf != std::string_view::npos && crlf < lf)) {
        return crlf + 4;
    }
    return lf + 2;
}

void parse_http(std::string_view block, WarcRecord& record)
{
    const auto end = header_end(block, 0);
    if (!has_prefix(block, "HTTP/") || end == std::string_view::npos) {
        return;
    }
    const auto eol = block.find('\n');
    const auto status_line = block.substr(0, eol);
    const auto space = status_line.find(' ');
    if (space == std::string_view::npos) {
        return;
    }
    auto code = status_line.substr(space + 1, 3);
    int status = 0;
    const auto [ptr, ec] = std::from_chars(code.data(), code.data() + code.size(), status);
    if (ec != std::errc() || ptr != code.data() + code.size() || status < 100 || status > 999) {
        return;
    }
    record.http_status = status;
    std::map<std::string, std::string> headers;
    parse_fields(block.substr(eol + 1, end - eol - 1), headers);
    if (auto it = headers.find("content-type"); it != headers.end()) {
        record.http_mime = lower(trim(std::string_view(it->second).substr(0, it->second.find(';'))));
    }
}

} // namespace

std::string WarcRecord::field(const std::string& lowercase_name) const
{
    auto it = fields.find(lowercase_name);
    return it == fields.end() ? std::string() : it->second;
}

std::optional<WarcRecord> parse_warc_record(std::string_view head)
{
    if (!has_prefix(head, "WARC/")) {
        return std::nullopt;
    }
    const auto end = header_end(head, 0);
    if (end == std::string_view::npos) {
        return std::nullopt;
    }
    WarcRecord record;
    const auto eol = head.find('\n');
    record.version = std::string(trim(head.substr(0, eol)));
    parse_fields(head.substr(eol + 1, end - eol - 1), record.fields);
    record.header_size = end;
    const auto length = record.field("content-length");
    const auto [ptr, ec] = std::from_chars(length.data(), length.data() + length.size(), record.content_length);
    if (length.empty() || ec != std::errc() || ptr != length.data() + length.size()) {
        return std::nullopt;
    }
    const auto type = record.type();
    if ((type == "response" || type == "revisit") &&
        has_prefix(lower(record.field("content-type")), "application/http")) {
        parse_http(head.substr(end), record);
    }
    return record;
}

std::optional<std::string> warc_date_to_timestamp(std::string_view date)
{
    // YYYY-MM-DDThh:mm:ss, then an optional fraction, then Z.
    if (date.size() < 20 || date.back() != 'Z') {
        return std::nullopt;
    }
    static constexpr std::string_view k_shape = "dddd-dd-ddTdd:dd:dd";
    std::string out;
    for (std::size_t i = 0; i < k_shape.size(); ++i) {
        const char c = date[i];
        if (k_shape[i] == 'd') {
            if (!std::isdigit(static_cast<unsigned char>(c))) {
                return std::nullopt;
            }
            out += c;
        } else if (c != k_shape[i]) {
            return std::nullopt;
        }
    }
    auto rest = date.substr(k_shape.size(), date.size() - k_shape.size() - 1);
    if (!rest.empty()) {
        if (rest.front() != '.' || rest.size() < 2 ||
            !std::all_of(rest.begin() + 1, rest.end(), [](unsigned char c) { return std::isdigit(c); })) {
            return std::nullopt;
        }
    }
    return out;
}

} // namespace orch
