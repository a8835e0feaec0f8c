#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

// SHA-256 through OpenSSL's libcrypto (EVP), for the digests of a WACZ
// (datapackage.json resources, datapackage-digest.json) and of WARC records.
namespace orch {

// An incremental digest. Not copyable; one per thread.
class Sha256 {
public:
    // Throws std::runtime_error when libcrypto cannot set up a digest context.
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(const void* data, std::size_t size);
    void update(std::string_view data) { update(data.data(), data.size()); }
    // 64 lowercase hex digits. The digest is finished: call no update() after it.
    std::string hex();

private:
    struct Context;
    std::unique_ptr<Context> m_ctx;
};

// The lowercase hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);
// The lowercase hex SHA-256 of a file's bytes, read in blocks. Throws
// std::system_error when it cannot be opened or read.
std::string sha256_file_hex(const std::filesystem::path& file);

} // namespace orch
