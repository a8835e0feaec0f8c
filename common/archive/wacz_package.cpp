#include "common/archive/wacz_package.hpp"

#include "common/archive/cdxj_index.hpp"
#include "common/archive/sha256.hpp"
#include "common/archive/zip_writer.hpp"
#include "common/base/errors.hpp"
#include "common/base/fd.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <set>
#include <stdexcept>

namespace orch {
namespace {

constexpr const char* k_wacz_version = "1.1.1";

// The temporary file the package is written into; removed unless committed.
class TemporaryTarget {
public:
    explicit TemporaryTarget(const std::filesystem::path& target) : m_target(target)
    {
        auto dir = target.parent_path();
        std::string pattern = (dir.empty() ? std::filesystem::path(".") : dir) / (target.filename().string() + ".tmp-XXXXXX");
        Fd fd(::mkostemp(pattern.data(), O_CLOEXEC));
        if (!fd) {
            throw_errno("cannot create a file beside " + target.string());
        }
        m_path = pattern;
    }
    ~TemporaryTarget()
    {
        if (!m_path.empty()) {
            ::unlink(m_path.c_str());
        }
    }
    TemporaryTarget(const TemporaryTarget&) = delete;
    TemporaryTarget& operator=(const TemporaryTarget&) = delete;

    const std::filesystem::path& path() const { return m_path; }

    // Syncs the finished file and renames it over the target.
    void commit()
    {
        Fd fd(::open(m_path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd || ::fsync(fd.get()) != 0) {
            throw_errno("sync " + m_path.string());
        }
        if (::rename(m_path.c_str(), m_target.c_str()) != 0) {
            throw_errno("rename " + m_path.string() + " to " + m_target.string());
        }
        m_path.clear();
    }

private:
    std::filesystem::path m_target;
    std::filesystem::path m_path;
};

nlohmann::ordered_json resource(const std::string& path, const std::string& hex, std::uint64_t bytes)
{
    nlohmann::ordered_json r;
    r["name"] = std::filesystem::path(path).filename().string();
    r["path"] = path;
    r["hash"] = "sha256:" + hex;
    r["bytes"] = bytes;
    return r;
}

// Text from the database may hold bytes that are not UTF-8 (a title cut
// mid-character): replaced rather than refused.
std::string dump(const nlohmann::ordered_json& j, int indent = -1)
{
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string pages_jsonl(const std::vector<WaczPage>& pages)
{
    std::string out = R"({"format":"json-pages-1.0","id":"pages","title":"All Pages"})";
    out += '\n';
    for (const auto& page : pages) {
        nlohmann::ordered_json line;
        line["url"] = page.url;
        line["ts"] = page.ts;
        if (!page.title.empty()) {
            line["title"] = page.title;
        }
        out += dump(line) + '\n';
    }
    return out;
}

} // namespace

std::string iso_utc_now()
{
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

WaczResult write_wacz(const std::filesystem::path& target, const WaczInput& input)
{
    if (input.warcs.empty()) {
        throw std::invalid_argument("a WACZ needs at least one WARC file");
    }
    std::set<std::string> names;
    for (const auto& warc : input.warcs) {
        if (warc.name.empty() || warc.name.find('/') != std::string::npos || !names.insert(warc.name).second) {
            throw std::invalid_argument("WARC file name empty, with a '/' or twice in one WACZ: " + warc.name);
        }
    }
    TemporaryTarget temporary(target);
    WaczResult result;
    CdxjIndex index;
    nlohmann::ordered_json resources = nlohmann::ordered_json::array();
    {
        ZipWriter zip(temporary.path());
        for (const auto& warc : input.warcs) {
            const auto path = "archive/" + warc.name;
            index.add_warc(warc.path, warc.name);
            resources.push_back(resource(path, sha256_file_hex(warc.path), std::filesystem::file_size(warc.path)));
            zip.add_file(path, warc.path);
        }
        auto cdxj = index.text();
        auto pages = pages_jsonl(input.pages);
        resources.push_back(resource("indexes/index.cdxj", sha256_hex(cdxj), cdxj.size()));
        resources.push_back(resource("pages/pages.jsonl", sha256_hex(pages), pages.size()));
        nlohmann::ordered_json package;
        package["profile"] = "data-package";
        package["wacz_version"] = k_wacz_version;
        if (!input.title.empty()) {
            package["title"] = input.title;
        }
        package["created"] = input.created.empty() ? iso_utc_now() : input.created;
        package["software"] = input.software;
        if (!input.main_page_url.empty()) {
            package["mainPageUrl"] = input.main_page_url;
        }
        if (!input.main_page_date.empty()) {
            package["mainPageDate"] = input.main_page_date;
        }
        package["resources"] = resources;
        auto datapackage = dump(package, 2);
        nlohmann::ordered_json digest;
        digest["path"] = "datapackage.json";
        digest["hash"] = "sha256:" + sha256_hex(datapackage);
        zip.add_bytes("indexes/index.cdxj", std::move(cdxj));
        zip.add_bytes("pages/pages.jsonl", std::move(pages));
        zip.add_bytes("datapackage.json", std::move(datapackage));
        zip.add_bytes("datapackage-digest.json", dump(digest, 2));
        zip.close();
    }
    result.index_lines = index.size();
    result.notes = index.notes();
    result.bytes = std::filesystem::file_size(temporary.path());
    temporary.commit();
    return result;
}

} // namespace orch
