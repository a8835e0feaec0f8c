#include "common/archive/zip_writer.hpp"

#include <fmt/format.h>
#include <zip.h>

#include <stdexcept>

namespace orch {

ZipWriter::ZipWriter(const std::filesystem::path& file) : m_file(file)
{
    int error = 0;
    m_zip = zip_open(file.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
    if (!m_zip) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, error);
        const std::string why = zip_error_strerror(&ze);
        zip_error_fini(&ze);
        throw std::runtime_error(fmt::format("cannot create {}: {}", file.string(), why));
    }
}

ZipWriter::~ZipWriter()
{
    if (m_zip) {
        zip_discard(m_zip);
    }
}

void ZipWriter::store(const std::string& name, zip_source_t* source)
{
    if (!source) {
        throw std::runtime_error(fmt::format("{}: cannot add {}: {}", m_file.string(), name, zip_strerror(m_zip)));
    }
    const auto index = zip_file_add(m_zip, name.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
        zip_source_free(source);
        throw std::runtime_error(fmt::format("{}: cannot add {}: {}", m_file.string(), name, zip_strerror(m_zip)));
    }
    if (zip_set_file_compression(m_zip, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0) {
        throw std::runtime_error(
            fmt::format("{}: cannot store {} uncompressed: {}", m_file.string(), name, zip_strerror(m_zip)));
    }
}

void ZipWriter::add_file(const std::string& name, const std::filesystem::path& source)
{
    store(name, zip_source_file(m_zip, source.c_str(), 0, 0));
}

void ZipWriter::add_bytes(const std::string& name, std::string bytes)
{
    const auto& kept = m_buffers.emplace_back(std::move(bytes));
    store(name, zip_source_buffer(m_zip, kept.data(), kept.size(), 0));
}

void ZipWriter::close()
{
    if (zip_close(m_zip) != 0) {
        const std::string why = zip_strerror(m_zip);
        throw std::runtime_error(fmt::format("cannot write {}: {}", m_file.string(), why));
    }
    m_zip = nullptr;
    m_buffers.clear();
}

} // namespace orch
