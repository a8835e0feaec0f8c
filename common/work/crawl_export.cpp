#include "common/work/crawl_export.hpp"

#include "common/base/errors.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <set>
#include <system_error>

namespace orch {
namespace {

constexpr const char* k_iso_utc = "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'";

const std::string k_crawl = fmt::format(
    "SELECT status, urls[1], coalesce(label, ''), "
    "  coalesce(to_char(started_at AT TIME ZONE 'UTC', {0}), '') "
    "FROM crawl WHERE id = $1",
    k_iso_utc);
// Every WARC output of the latest attempt of each hook of the crawl's snapshots.
// Snapshots added together (the seeds) keep the order of the crawl's URLs.
const std::string k_warcs =
    "SELECT s.id::text, ar.plugin, f->>'path' "
    "FROM crawl c JOIN snapshot s ON s.crawl_id = c.id JOIN archive_result ar ON ar.snapshot_id = s.id "
    "  CROSS JOIN LATERAL jsonb_array_elements(ar.output_files) f "
    "WHERE c.id = $1 AND jsonb_typeof(f->'path') = 'string' "
    "  AND (f->>'path' LIKE '%.warc.gz' OR f->>'path' LIKE '%.warc') "
    "ORDER BY s.created_at, array_position(c.urls, s.url), s.url, ar.hook_name, f->>'path'";
const std::string k_pages = fmt::format(
    "SELECT s.url, coalesce(to_char(coalesce(s.started_at, s.sealed_at, s.created_at) AT TIME ZONE 'UTC', {0}), ''), "
    "  coalesce(s.title, '') "
    "FROM crawl c JOIN snapshot s ON s.crawl_id = c.id WHERE c.id = $1 AND s.outcome = 'succeeded' "
    "ORDER BY s.created_at, array_position(c.urls, s.url), s.url",
    k_iso_utc);

// A path from output_files that stays inside its hook's directory.
bool is_relative_inside(const std::filesystem::path& path)
{
    if (path.empty() || path.is_absolute()) {
        return false;
    }
    for (const auto& part : path) {
        if (part == "..") {
            return false;
        }
    }
    return true;
}

} // namespace

CrawlExport read_crawl_export(pqxx::connection& conn, const std::string& crawl_id,
                              const std::filesystem::path& data_dir)
{
    conn.prepare("crawl_export.crawl", k_crawl);
    conn.prepare("crawl_export.warcs", k_warcs);
    conn.prepare("crawl_export.pages", k_pages);
    pqxx::read_transaction tx(conn);
    auto crawl = tx.exec_prepared("crawl_export.crawl", crawl_id);
    if (crawl.empty()) {
        throw NotFound(fmt::format("crawl {} not found", crawl_id));
    }
    CrawlExport out;
    out.status = crawl[0][0].as<std::string>();
    auto& input = out.input;
    input.main_page_url = crawl[0][1].as<std::string>();
    const auto label = crawl[0][2].as<std::string>();
    input.title = label.empty() ? "crawl " + crawl_id : label;
    input.main_page_date = crawl[0][3].as<std::string>();
    std::set<std::string> names;
    for (const auto& row : tx.exec_prepared("crawl_export.warcs", crawl_id)) {
        const auto snapshot = row[0].as<std::string>();
        const std::filesystem::path relative = row[2].as<std::string>();
        if (!is_relative_inside(relative)) {
            out.notes.push_back(fmt::format("snapshot {}: output file {} is not inside its hook's directory; left out",
                                            snapshot, relative.string()));
            continue;
        }
        const auto path = data_dir / "snapshots" / snapshot / row[1].as<std::string>() / relative;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec)) {
            out.notes.push_back(fmt::format("snapshot {}: WARC file {} is missing; left out", snapshot, path.string()));
            continue;
        }
        auto name = relative.filename().string();
        if (!names.insert(name).second) {
            name = snapshot + "-" + row[1].as<std::string>() + "-" + name;
            names.insert(name);
        }
        input.warcs.push_back(WaczWarc{name, path});
    }
    for (const auto& row : tx.exec_prepared("crawl_export.pages", crawl_id)) {
        WaczPage page{row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>()};
        if (page.url == input.main_page_url && !page.ts.empty()) {
            input.main_page_date = page.ts;
        }
        input.pages.push_back(std::move(page));
    }
    return out;
}

WaczResult export_crawl_wacz(pqxx::connection& conn, const std::string& crawl_id,
                             const std::filesystem::path& data_dir, const std::filesystem::path& target,
                             bool require_sealed, std::vector<std::string>& notes)
{
    auto crawl = read_crawl_export(conn, crawl_id, data_dir);
    notes.insert(notes.end(), crawl.notes.begin(), crawl.notes.end());
    if (require_sealed && crawl.status != "sealed") {
        throw Error(ExitCode::not_sealed,
                    fmt::format("crawl {} is {}, not sealed: export it once it is sealed (`orchestrator show crawl {}`)",
                                crawl_id, crawl.status, crawl_id));
    }
    if (crawl.input.warcs.empty()) {
        throw NotFound(fmt::format("crawl {} has no WARC file to export (no output file of its snapshots ends in "
                                   ".warc.gz or .warc{})",
                                   crawl_id, crawl.notes.empty() ? "" : ", or the ones listed are missing"));
    }
    crawl.input.software = fmt::format("orchestrator {}", PROJECT_VERSION_STRING);
    const auto dir = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
    std::error_code ec;
    if (std::filesystem::is_directory(target, ec)) {
        throw InvalidInput(fmt::format("cannot write {}: it is a directory", target.string()));
    }
    WaczResult result;
    try {
        result = write_wacz(target, crawl.input);
    } catch (const std::system_error& e) {
        if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0) {
            throw InvalidInput(fmt::format("cannot write {}: {}", target.string(), e.what()));
        }
        throw;
    }
    notes.insert(notes.end(), result.notes.begin(), result.notes.end());
    return result;
}

} // namespace orch
