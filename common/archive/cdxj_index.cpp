#include "common/archive/cdxj_index.hpp"

#include "common/archive/surt.hpp"
#include "common/archive/warc_file_records.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace orch {

void CdxjIndex::add_warc(const std::filesystem::path& file, const std::string& filename)
{
    WarcFileRecords records(file);
    while (auto located = records.next()) {
        const auto& record = located->record;
        const auto type = record.type();
        if (type != "response" && type != "revisit" && type != "resource") {
            continue;
        }
        auto url = record.field("warc-target-uri");
        // WARC/1.0 allowed the URI in angle brackets.
        if (url.size() >= 2 && url.front() == '<' && url.back() == '>') {
            url = url.substr(1, url.size() - 2);
        }
        const auto timestamp = warc_date_to_timestamp(record.field("warc-date"));
        if (url.empty() || !timestamp) {
            continue;
        }
        std::string mime;
        std::string status;
        if (type == "revisit") {
            mime = "warc/revisit";
            status = record.http_status ? std::to_string(*record.http_status) : std::string();
        } else if (type == "response") {
            mime = record.http_mime;
            status = record.http_status ? std::to_string(*record.http_status) : std::string();
        } else {
            const auto content_type = record.field("content-type");
            mime = content_type.substr(0, content_type.find(';'));
            status = "200";
        }
        // pywb's field order and its string values.
        nlohmann::ordered_json entry;
        entry["url"] = url;
        if (!mime.empty()) {
            entry["mime"] = mime;
        }
        if (!status.empty()) {
            entry["status"] = status;
        }
        // Without its "sha256:" / "sha1:" prefix, as pywb and warcio.js index it.
        if (auto digest = record.field("warc-payload-digest"); !digest.empty()) {
            entry["digest"] = digest.substr(digest.find(':') + 1);
        }
        entry["length"] = std::to_string(located->length);
        entry["offset"] = std::to_string(located->offset);
        entry["filename"] = filename;
        // A URL that is not UTF-8 is kept readable rather than refused.
        m_lines.push_back(surt_key(url) + " " + *timestamp + " " +
                          entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    m_notes.insert(m_notes.end(), records.notes().begin(), records.notes().end());
}

std::string CdxjIndex::text() const
{
    auto lines = m_lines;
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& line : lines) {
        out += line;
        out += '\n';
    }
    return out;
}

} // namespace orch
