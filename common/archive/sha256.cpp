#include "common/archive/sha256.hpp"

#include "common/base/errors.hpp"
#include "common/base/fd.hpp"

#include <openssl/evp.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <stdexcept>

namespace orch {

struct Sha256::Context {
    EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : m_ctx(std::make_unique<Context>())
{
    m_ctx->ctx = EVP_MD_CTX_new();
    if (!m_ctx->ctx || EVP_DigestInit_ex(m_ctx->ctx, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(m_ctx->ctx);
        throw std::runtime_error("libcrypto: cannot start a SHA-256 digest");
    }
}

Sha256::~Sha256()
{
    EVP_MD_CTX_free(m_ctx->ctx);
}

void Sha256::update(const void* data, std::size_t size)
{
    if (size && EVP_DigestUpdate(m_ctx->ctx, data, size) != 1) {
        throw std::runtime_error("libcrypto: SHA-256 update failed");
    }
}

std::string Sha256::hex()
{
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(m_ctx->ctx, digest.data(), &length) != 1) {
        throw std::runtime_error("libcrypto: SHA-256 final failed");
    }
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * length);
    for (unsigned int i = 0; i < length; ++i) {
        out += k_hex[digest[i] >> 4];
        out += k_hex[digest[i] & 0xf];
    }
    return out;
}

std::string sha256_hex(std::string_view data)
{
    Sha256 digest;
    digest.update(data);
    return digest.hex();
}

std::string sha256_file_hex(const std::filesystem::path& file)
{
    Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        throw_errno("open " + file.string());
    }
    Sha256 digest;
    std::array<char, 1 << 16> block{};
    for (;;) {
        const auto n = ::read(fd.get(), block.data(), block.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_errno("read " + file.string());
        }
        if (n == 0) {
            break;
        }
        digest.update(block.data(), static_cast<std::size_t>(n));
    }
    return digest.hex();
}

} // namespace orch
