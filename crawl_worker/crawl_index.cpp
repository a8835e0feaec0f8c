#include "crawl_worker/crawl_index.hpp"

#include "common/base/atomic_file.hpp"
#include "common/base/log.hpp"
#include "common/db/autocommit_statement.hpp"
#include "common/hooks/hook_env.hpp"
#include "common/work/snapshot_index.hpp"

#include <fmt/format.h>

#include <cctype>
#include <stdexcept>

namespace orch {
namespace {

constexpr int k_page_rows = 500;

std::string crawl_statement()
{
    const auto ts = index_timestamp_sql;
    return fmt::format(
        "SELECT json_build_object('id', c.id, 'urls', c.urls, 'label', c.label, 'tags', c.tags,"
        "  'config', c.config, 'max_depth', c.max_depth, 'max_urls', c.max_urls, 'status', c.status,"
        "  'outcome', c.outcome, 'seal_reason', c.seal_reason, 'created_at', {0}, 'started_at', {1},"
        "  'sealed_at', {2}, 'counts', json_build_object('total', k.total, 'succeeded', k.succeeded,"
        "     'partial', k.partial, 'failed', k.failed, 'cancelled', k.cancelled, 'timed_out', k.timed_out,"
        "     'unsealed', k.unsealed))::text, {3} "
        "FROM crawl c CROSS JOIN LATERAL (SELECT count(*) AS total,"
        "  count(*) FILTER (WHERE s.outcome = 'succeeded') AS succeeded,"
        "  count(*) FILTER (WHERE s.outcome = 'partial') AS partial,"
        "  count(*) FILTER (WHERE s.outcome = 'failed') AS failed,"
        "  count(*) FILTER (WHERE s.outcome = 'cancelled') AS cancelled,"
        "  count(*) FILTER (WHERE s.outcome = 'timed_out') AS timed_out,"
        "  count(*) FILTER (WHERE s.status <> 'sealed') AS unsealed"
        "  FROM snapshot s WHERE s.crawl_id = c.id) k WHERE c.id = $1",
        ts("c.created_at"), ts("c.started_at"), ts("c.sealed_at"), ts("now()"));
}

// Each snapshot in creation order (id breaks ties: a stable order), with its
// main outputs: paths relative to the snapshot's directory.
std::string snapshots_cursor()
{
    return fmt::format(
        "DECLARE crawl_index_rows NO SCROLL CURSOR FOR "
        "SELECT json_build_object('id', s.id, 'url', s.url, 'title', s.title, 'depth', s.depth,"
        "  'status', s.status, 'outcome', s.outcome, 'error', s.error, 'sealed_at', {0},"
        "  'dir', 'snapshots/' || s.id,"
        "  'outputs', coalesce((SELECT json_agg(json_build_object('plugin', o.plugin, 'path', o.path, 'size', o.size)"
        "                                       ORDER BY o.rank, o.path)"
        "     FROM (SELECT a.plugin, a.plugin || '/' || (f->>'path') AS path, (f->>'size')::bigint AS size,"
        "                  CASE WHEN f->>'path' ~* '\\.(png|jpe?g|webp)$' THEN 0 WHEN f->>'path' ~* '\\.pdf$' THEN 1"
        "                       WHEN f->>'path' ~* '\\.html?$' THEN 2 WHEN f->>'path' ~* '\\.warc(\\.gz)?$' THEN 3"
        "                       ELSE 4 END AS rank"
        "           FROM archive_result a CROSS JOIN LATERAL jsonb_array_elements(a.output_files) f"
        "           WHERE a.snapshot_id = s.id ORDER BY rank, path LIMIT {1}) o), '[]'::json),"
        "  'outputs_total', (SELECT coalesce(sum(jsonb_array_length(a.output_files)), 0)"
        "                    FROM archive_result a WHERE a.snapshot_id = s.id))::text "
        "FROM snapshot s WHERE s.crawl_id = $1 ORDER BY s.created_at, s.id",
        index_timestamp_sql("s.sealed_at"), k_crawl_index_outputs);
}

std::string json_text(const nlohmann::ordered_json& j, int indent = -1)
{
    return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string text_of(const nlohmann::ordered_json& j, const char* key)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return {};
    }
    return it->is_string() ? it->get<std::string>() : json_text(*it);
}

constexpr const char* k_html_head = R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{0}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }}
td.url {{ word-break: break-all; max-width: 40em; }}
td.outputs a {{ margin-right: 0.6em; }}
.failed, .timed_out, .cancelled {{ color: #a00; }}
.partial {{ color: #a60; }}
</style>
</head>
<body>
<h1>{0}</h1>
<p>Crawl <code>{1}</code>: {2}. Seeds: {3}. Written {4}; <a href="index.json">index.json</a> has the same in JSON.</p>
<table id="pages">
<thead><tr><th>#</th><th>Title</th><th>URL</th><th>Status</th><th>Depth</th><th>Outputs</th></tr></thead>
<tbody>
)";

std::string crawl_summary(const nlohmann::ordered_json& crawl)
{
    const auto& k = crawl["counts"];
    auto s = text_of(crawl, "status");
    if (!crawl["outcome"].is_null()) {
        s += " " + text_of(crawl, "outcome");
    }
    return fmt::format("{}; {} snapshots: {} succeeded, {} partial, {} failed, {} cancelled, {} timed out", s,
                       text_of(k, "total"), text_of(k, "succeeded"), text_of(k, "partial"), text_of(k, "failed"),
                       text_of(k, "cancelled"), text_of(k, "timed_out"));
}

std::string html_row(long n, const nlohmann::ordered_json& s)
{
    const auto base = "../../" + url_path_escaped(text_of(s, "dir")) + "/";
    const auto url = text_of(s, "url");
    const auto title = text_of(s, "title");
    const auto state = s["outcome"].is_null() ? text_of(s, "status") : text_of(s, "outcome");
    std::string outputs;
    for (const auto& o : s["outputs"]) {
        const auto path = text_of(o, "path");
        outputs += fmt::format("<a href=\"{}\">{}</a> ", html_escaped(base + url_path_escaped(path)),
                               html_escaped(path));
    }
    const long total = s["outputs_total"].is_number() ? s["outputs_total"].get<long>() : 0;
    if (total > static_cast<long>(s["outputs"].size())) {
        outputs += fmt::format("(+{} more) ", total - static_cast<long>(s["outputs"].size()));
    }
    outputs += fmt::format("<a href=\"{}\">index.json</a>", html_escaped(base + "index.json"));
    return fmt::format("<tr class=\"{0}\"><td>{1}</td><td class=\"title\">{2}</td><td class=\"url\">{3}</td>"
                       "<td class=\"status\">{4}</td><td>{5}</td><td class=\"outputs\">{6}</td></tr>\n",
                       html_escaped(state), n, html_escaped(title), html_escaped(url), html_escaped(state),
                       text_of(s, "depth"), outputs);
}

// Both files from one read-only transaction; they are renamed into place only
// once both are whole.
void write_both(pqxx::connection& conn, const std::string& crawl_id, const std::filesystem::path& crawl_dir)
{
    static const auto crawl_sql = crawl_statement();
    static const auto cursor_sql = snapshots_cursor();
    conn.prepare("crawl_index.crawl", crawl_sql);
    conn.prepare("crawl_index.snapshots", cursor_sql);
    pqxx::read_transaction tx(conn);
    auto r = tx.exec_prepared("crawl_index.crawl", crawl_id);
    if (r.empty()) {
        throw std::runtime_error("no such crawl");
    }
    auto crawl = nlohmann::ordered_json::parse(r[0][0].c_str());
    crawl["config"] = redacted_config(crawl["config"]);
    const auto written_at = r[0][1].as<std::string>();

    std::filesystem::create_directories(crawl_dir);
    AtomicFile json(crawl_dir / "index.json");
    AtomicFile html(crawl_dir / "index.html");
    json << "{\n \"format\": " << std::to_string(k_crawl_index_format) << ",\n \"written_at\": "
         << json_text(written_at) << ",\n \"crawl\": " << json_text(crawl) << ",\n \"snapshots\": [";
    std::string seeds;
    for (const auto& u : crawl["urls"]) {
        seeds += (seeds.empty() ? "" : ", ") + html_escaped(u.is_string() ? u.get<std::string>() : json_text(u));
    }
    const auto heading = crawl["label"].is_string() ? crawl["label"].get<std::string>() : "Crawl " + crawl_id;
    html << fmt::format(k_html_head, html_escaped(heading), html_escaped(crawl_id), html_escaped(crawl_summary(crawl)),
                        seeds, html_escaped(written_at));

    tx.exec_prepared("crawl_index.snapshots", crawl_id);
    long n = 0;
    for (;;) {
        auto page = tx.exec("FETCH " + std::to_string(k_page_rows) + " FROM crawl_index_rows");
        if (page.empty()) {
            break;
        }
        for (const auto& row : page) {
            const auto snapshot = nlohmann::ordered_json::parse(row[0].c_str());
            json << (n == 0 ? "\n  " : ",\n  ") << json_text(snapshot);
            html << html_row(++n, snapshot);
        }
    }
    tx.commit();
    json << (n == 0 ? "]\n}\n" : "\n ]\n}\n");
    html << "</tbody>\n</table>\n</body>\n</html>\n";
    json.commit(true);
    html.commit(true);
}

} // namespace

nlohmann::ordered_json redacted_config(nlohmann::ordered_json config)
{
    // The rule the process table applies to environments (redact_env), here to
    // each string under its key, however deep.
    const auto redact = [](const std::string& key, nlohmann::ordered_json& value, const auto& self) -> void {
        if (value.is_object()) {
            for (auto it = value.begin(); it != value.end(); ++it) {
                self(it.key(), it.value(), self);
            }
        } else if (value.is_array()) {
            for (auto& element : value) {
                self(key, element, self);
            }
        } else if (is_secret_env_name(key)) {
            value = "[redacted]";
        } else if (value.is_string()) {
            const auto checked = redact_env({{"value", value.get<std::string>()}});
            if (checked.at("value") != value.get<std::string>()) {
                value = "[redacted]";
            }
        }
    };
    redact(std::string(), config, redact);
    return config;
}

std::string html_escaped(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

std::string url_path_escaped(std::string_view path)
{
    std::string out;
    for (char c : path) {
        const auto b = static_cast<unsigned char>(c);
        if (std::isalnum(b) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out += c;
        } else {
            out += fmt::format("%{:02X}", b);
        }
    }
    return out;
}

long write_snapshot_indexes_sealed_by(pqxx::connection& conn, const std::string& crawl_id,
                                      const std::string& sealer, const std::filesystem::path& data_dir) noexcept
{
    long written = 0;
    try {
        // Keyset pages by id: each snapshot's index is its own statement, which
        // cannot run inside a cursor's transaction.
        std::string after = "00000000-0000-0000-0000-000000000000";
        for (;;) {
            auto page = exec_autocommit(
                conn, "crawl_index.sealed_by",
                "SELECT id FROM snapshot WHERE crawl_id = $1 AND status = 'sealed'"
                " AND (sealed_by = $2 OR sealed_by IS NULL) AND id > $3 ORDER BY id LIMIT 500",
                crawl_id, sealer, after);
            if (page.empty()) {
                break;
            }
            for (const auto& row : page) {
                after = row[0].as<std::string>();
                written += write_snapshot_index(conn, after, data_dir / "snapshots" / after) ? 1 : 0;
            }
        }
    } catch (const std::exception& e) {
        log::warn("snapshot indexes of the crawl worker's seals not written",
                  {{"crawl", crawl_id}, {"error", e.what()}});
    }
    return written;
}

bool write_crawl_index(pqxx::connection& conn, const std::string& crawl_id,
                       const std::filesystem::path& crawl_dir) noexcept
{
    try {
        write_both(conn, crawl_id, crawl_dir);
        return true;
    } catch (const std::exception& e) {
        log::warn("crawl index not written", {{"crawl", crawl_id}, {"error", e.what()}});
    } catch (...) {
        log::warn("crawl index not written", {{"crawl", crawl_id}});
    }
    return false;
}

} // namespace orch
