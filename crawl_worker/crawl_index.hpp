#pragma once

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <filesystem>
#include <string>
#include <string_view>

// A crawl's index.json and index.html in its directory ($CRAWL_DIR): the crawl
// and one entry per snapshot, so that a crawl can be read, and its pages
// opened, without the database. Both are described in docs/archive-layout.md
// (index.json also in docs/crawl-index.schema.json); k_crawl_index_format is
// the JSON's "format".
namespace orch {

inline constexpr int k_crawl_index_format = 1;
// The outputs an entry lists at most (main ones first: screenshot, PDF, DOM or
// HTML, WARC; then the others by path); the snapshot's own index.json has all.
inline constexpr int k_crawl_index_outputs = 50;

// Rewrites `<crawl_dir>/index.json` and `<crawl_dir>/index.html`, each
// atomically (a temporary file beside it, renamed over it; fsynced: written once
// per crawl, at its seal). The snapshots are read through a cursor, a page at a
// time, and written as they come: a crawl of any size is never held in memory.
// One read-only transaction, so both files state the same moment. The crawl's
// config is written without secrets (redacted_config). A failure is logged as
// a warning and returned as false, never thrown: the crawl is sealed already.
// Must not be called while a transaction is open on `conn`.
bool write_crawl_index(pqxx::connection& conn, const std::string& crawl_id,
                       const std::filesystem::path& crawl_dir) noexcept;

// Writes the index.json (write_snapshot_index) of each snapshot of the crawl
// that `sealer` (the crawl worker's process row) sealed itself, or that has no
// sealer (an operator's cancel): a snapshot given up after its workers died, or
// sealed when the crawl stopped early, whose snapshot worker wrote no index of
// its seal. Reads their ids 500 at a time. Returns how many were written; a
// failure is logged, never thrown.
long write_snapshot_indexes_sealed_by(pqxx::connection& conn, const std::string& crawl_id,
                                      const std::string& sealer, const std::filesystem::path& data_dir) noexcept;

// `config` with the values of secret-looking names (is_secret_env_name) and
// strings embedding URL credentials replaced by "[redacted]", at any depth.
nlohmann::ordered_json redacted_config(nlohmann::ordered_json config);

// `text` escaped for HTML text and attribute values (& < > " ').
std::string html_escaped(std::string_view text);
// A relative file path as a URL path: every byte but unreserved ones and '/'
// percent-encoded, so that '#', '?', '%' and spaces in a name stay a name.
std::string url_path_escaped(std::string_view path);

} // namespace orch
