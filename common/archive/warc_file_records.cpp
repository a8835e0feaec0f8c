#include "common/archive/warc_file_records.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace orch {
namespace {

// A record's header block and an HTTP header after it fit in this much.
constexpr std::size_t k_head_limit = 256 * 1024;

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

WarcFileRecords::WarcFileRecords(const std::filesystem::path& file) : m_file(file)
{
    if (ends_with(file.filename().string(), ".gz")) {
        m_members = std::make_unique<GzipMembers>(file, k_head_limit);
        return;
    }
    m_fd = Fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!m_fd) {
        throw_errno("open " + file.string());
    }
    struct stat st {};
    if (::fstat(m_fd.get(), &st) != 0) {
        throw_errno("fstat " + file.string());
    }
    m_size = static_cast<std::uint64_t>(st.st_size);
}

WarcFileRecords::~WarcFileRecords() = default;

std::optional<LocatedRecord> WarcFileRecords::next()
{
    if (m_done) {
        return std::nullopt;
    }
    if (!m_members) {
        return next_plain();
    }
    while (auto member = m_members->next()) {
        auto record = parse_warc_record(member->head);
        if (!record) {
            m_notes.push_back(fmt::format("{}: the gzip member at offset {} holds no WARC record; skipped",
                                          m_file.string(), member->offset));
            continue;
        }
        return LocatedRecord{member->offset, member->length, std::move(*record)};
    }
    m_done = true;
    if (m_members->problem()) {
        m_notes.push_back(*m_members->problem());
    }
    return std::nullopt;
}

std::optional<LocatedRecord> WarcFileRecords::next_plain()
{
    if (m_offset >= m_size) {
        m_done = true;
        return std::nullopt;
    }
    std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(k_head_limit, m_size - m_offset)), '\0');
    std::size_t got = 0;
    while (got < head.size()) {
        const auto n = ::pread(m_fd.get(), head.data() + got, head.size() - got, static_cast<off_t>(m_offset + got));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_errno("read " + m_file.string());
        }
        if (n == 0) {
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    head.resize(got);
    auto record = parse_warc_record(head);
    m_done = !record;
    if (!record) {
        m_notes.push_back(fmt::format("{}: no WARC record at offset {}; indexed up to the record before it",
                                      m_file.string(), m_offset));
        return std::nullopt;
    }
    // The block, then the two CRLFs that end every record.
    const std::uint64_t length = record->header_size + record->content_length + 4;
    if (m_offset + length > m_size) {
        m_done = true;
        m_notes.push_back(fmt::format("{}: the record at offset {} is cut short ({} of its {} bytes); indexed up to "
                                      "the record before it",
                                      m_file.string(), m_offset, m_size - m_offset, length));
        return std::nullopt;
    }
    LocatedRecord located{m_offset, length, std::move(*record)};
    m_offset += length;
    return located;
}

} // namespace orch
