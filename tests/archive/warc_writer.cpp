#include "tests/archive/warc_writer.hpp"

#include "common/archive/sha256.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace orch::test {

std::string http_response(int status, const std::string& mime, const std::string& body)
{
    return fmt::format("HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n{}", status, mime, body.size(),
                       body);
}

std::string warc_record(const std::string& type, const std::string& uri, const std::string& date,
                        const std::string& content_type, const std::string& block,
                        const std::vector<std::string>& extra)
{
    static int serial = 0;
    const auto payload_at = block.find("\r\n\r\n");
    const auto payload = block.compare(0, 5, "HTTP/") == 0 && payload_at != std::string::npos
                             ? block.substr(payload_at + 4)
                             : block;
    std::string out = "WARC/1.1\r\nWARC-Type: " + type + "\r\n";
    out += fmt::format("WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-{:012d}>\r\n", ++serial);
    if (!uri.empty()) {
        out += "WARC-Target-URI: " + uri + "\r\n";
    }
    out += "WARC-Date: " + date + "\r\n";
    out += "Content-Type: " + content_type + "\r\n";
    out += "WARC-Block-Digest: sha256:" + sha256_hex(block) + "\r\n";
    out += "WARC-Payload-Digest: sha256:" + sha256_hex(payload) + "\r\n";
    for (const auto& line : extra) {
        out += line + "\r\n";
    }
    out += fmt::format("Content-Length: {}\r\n\r\n", block.size());
    return out + block + "\r\n\r\n";
}

std::string warcinfo_record(const std::string& date)
{
    return warc_record("warcinfo", "", date, "application/warc-fields", "software: archive tests\r\n");
}

std::string response_record(const std::string& uri, const std::string& date, const std::string& mime,
                            const std::string& body)
{
    return warc_record("response", uri, date, "application/http; msgtype=response", http_response(200, mime, body));
}

std::string gzip_member(const std::string& data)
{
    z_stream zs{};
    if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw std::runtime_error("deflateInit2");
    }
    std::string out(deflateBound(&zs, data.size()) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        throw std::runtime_error("deflate");
    }
    return out;
}

void write_bytes(const std::filesystem::path& file, const std::string& bytes)
{
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) {
        throw std::runtime_error("cannot write " + file.string());
    }
}

std::string read_bytes(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace orch::test
