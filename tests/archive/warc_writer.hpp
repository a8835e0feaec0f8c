#pragma once

#include <filesystem>
#include <string>
#include <vector>

// Small WARC/1.1 files written by hand for the archive tests: records with
// sha256 block and payload digests (as the visit plugin writes them), each
// record its own gzip member.
namespace orch::test {

// "HTTP/1.1 <status> X\r\nContent-Type: <mime>\r\nContent-Length: ..\r\n\r\n<body>".
std::string http_response(int status, const std::string& mime, const std::string& body);

// One WARC/1.1 record: WARC-Type `type`, WARC-Target-URI `uri` (none when
// empty), WARC-Date `date`, Content-Type `content_type`, the digests, `block`.
// `extra` header lines ("Name: value") go before Content-Length.
std::string warc_record(const std::string& type, const std::string& uri, const std::string& date,
                        const std::string& content_type, const std::string& block,
                        const std::vector<std::string>& extra = {});
// A warcinfo record, the first of every file.
std::string warcinfo_record(const std::string& date);
// A response record of an HTTP 200 of `body`.
std::string response_record(const std::string& uri, const std::string& date, const std::string& mime,
                            const std::string& body);

// `data` as one gzip member (zlib).
std::string gzip_member(const std::string& data);

// Writes `bytes` to `file`. Throws std::runtime_error.
void write_bytes(const std::filesystem::path& file, const std::string& bytes);
std::string read_bytes(const std::filesystem::path& file);

} // namespace orch::test
