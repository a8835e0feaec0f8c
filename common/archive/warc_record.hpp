#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

// One WARC record's header block (WARC/1.0 and WARC/1.1), and for `response`
// and `revisit` records the status line and content type of the HTTP message
// they carry: what a CDXJ line needs.
namespace orch {

struct WarcRecord {
    std::string version;                       // "WARC/1.1"
    std::map<std::string, std::string> fields; // names lowercased; the first of repeated names
    std::uint64_t content_length = 0;
    std::size_t header_size = 0;               // bytes up to and including the blank line
    std::optional<int> http_status;            // of an HTTP message in the block
    std::string http_mime;                     // its Content-Type without parameters, lowercased

    // A field by its lowercase name; "" when absent.
    std::string field(const std::string& lowercase_name) const;
    std::string type() const { return field("warc-type"); }
};

// Parses the record at the start of `head` (its beginning: the header block
// and as much of the content as was read). nullopt when it does not start with
// a WARC header block: no "WARC/" version line, no blank line within `head`,
// or a Content-Length that is not a number. The HTTP part is read only for
// records whose Content-Type is application/http and whose HTTP header is
// within `head`.
std::optional<WarcRecord> parse_warc_record(std::string_view head);

// "2024-01-02T03:04:05Z" or with a fraction "...05.123456Z" -> "20240102030405";
// nullopt for anything else.
std::optional<std::string> warc_date_to_timestamp(std::string_view date);

} // namespace orch
