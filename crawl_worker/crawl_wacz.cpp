#include "crawl_worker/crawl_wacz.hpp"

#include "common/base/env_map.hpp"
#include "common/base/log.hpp"
#include "common/db/event_journal.hpp"
#include "common/hooks/hook_discovery.hpp"
#include "common/hooks/plugin_config.hpp"
#include "common/work/crawl_export.hpp"

#include <fmt/format.h>

namespace orch {

bool crawl_wacz_enabled(const PluginRoots& roots, const nlohmann::json& crawl_config)
{
    // Off unless asked for, also where the roots hold no `wacz` folder (a
    // machine with only its own plugins): the crawl config or WACZ_ENABLED
    // still switch it on there.
    nlohmann::json defaults = {{"enabled", false}};
    const auto catalog = discover_hooks(roots.builtin, roots.user);
    if (const auto* plugin = catalog.find_plugin("wacz")) {
        defaults.update(load_plugin_defaults(plugin->dir));
    }
    return resolve_plugin_config("wacz", defaults, crawl_config, current_environment()).enabled;
}

bool write_crawl_wacz(pqxx::connection& conn, const std::string& crawl_id, const std::filesystem::path& data_dir,
                      const std::filesystem::path& crawl_dir, const std::string& self_row_id) noexcept
{
    const auto target = crawl_dir / "wacz" / (crawl_id + ".wacz");
    try {
        std::filesystem::create_directories(target.parent_path());
        std::vector<std::string> notes;
        const auto result = export_crawl_wacz(conn, crawl_id, data_dir, target, false, notes);
        for (const auto& note : notes) {
            log::warn("wacz: " + note);
        }
        log::info("crawl WACZ written", {{"file", target.string()},
                                         {"index_lines", std::to_string(result.index_lines)},
                                         {"bytes", std::to_string(result.bytes)}});
        return true;
    } catch (const std::exception& e) {
        log::error("crawl WACZ not written", {{"file", target.string()}, {"error", e.what()}});
        try {
            Event failed{"crawl.wacz_failed", fmt::format("crawl WACZ not written: {}", e.what()), crawl_id};
            failed.process_id = self_row_id;
            failed.detail = {{"error", e.what()}, {"file", target.string()}};
            record_event(conn, "crawl_worker", failed);
        } catch (const std::exception& journal) {
            log::warn("cannot journal the failed WACZ", {{"error", journal.what()}});
        }
        return false;
    }
}

} // namespace orch
