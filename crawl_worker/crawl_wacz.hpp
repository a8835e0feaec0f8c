#pragma once

#include "common/hooks/plugin_roots.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <filesystem>
#include <string>

// The crawl's own WACZ, written by its crawl worker once the crawl is sealed
// (after its CrawlEnd hooks), when its configuration asks for it.
namespace orch {

// The `wacz` plugin's effective `enabled` (a plugin folder with a config.json
// and no hooks): config.json < crawl config (`{"plugins": {"wacz": {"enabled":
// true}}}` or `{"WACZ_ENABLED": true}`) < the environment (WACZ_ENABLED, and the
// PLUGINS allow-list). Off when no plugin root has a `wacz` folder, unless the
// crawl config or the environment switch it on. Throws ConfigError for a value
// of the wrong type, as the hooks' plan does.
bool crawl_wacz_enabled(const PluginRoots& roots, const nlohmann::json& crawl_config);

// Writes `crawl_dir`/wacz/<crawl id>.wacz from the crawl's WARC files. Blocks
// while it copies them. Never throws for a failure of its own: it is logged
// and journalled (`crawl.wacz_failed`, by `self_row_id`), and the crawl stays
// as it was sealed. Returns whether the file was written.
bool write_crawl_wacz(pqxx::connection& conn, const std::string& crawl_id, const std::filesystem::path& data_dir,
                      const std::filesystem::path& crawl_dir, const std::string& self_row_id) noexcept;

} // namespace orch
