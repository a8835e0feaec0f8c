#include "orchestrator/commands.hpp"

#include "common/database.hpp"
#include "common/errors.hpp"
#include "common/event_journal.hpp"
#include "common/migrate.hpp"
#include "orchestrator/crawl_config_check.hpp"
#include "orchestrator/crawl_enqueue.hpp"

#include <fmt/format.h>

#include <iostream>

namespace orch {

void command_add(const CommonOptions& options, const AddOptions& add)
{
    NewCrawl crawl;
    crawl.urls = add.urls;
    if (!add.urls_file.empty()) {
        auto more = read_urls_file(add.urls_file);
        crawl.urls.insert(crawl.urls.end(), more.begin(), more.end());
    }
    crawl.max_depth = add.depth;
    crawl.max_urls = add.max_urls;
    crawl.max_per_host = add.max_per_host;
    crawl.host_delay_s = add.host_delay_s;
    crawl.timeout_s = add.timeout_s;
    if (!add.label.empty()) {
        crawl.label = add.label;
    }
    crawl.tags = add.tags;
    // Validate before touching the database, so bad input never needs a connection.
    const auto url_count = validated_urls(crawl.urls).size();
    if (!add.config_json.empty()) {
        crawl.config = crawl_config_option(add.config_json, add.plugins_dir);
    }

    auto data_dir = prepare_data_dir(options);
    auto db = Database::open(options, data_dir);
    apply_migrations(db.conn());
    pqxx::work tx(db.conn());
    auto id = enqueue_crawl(tx, crawl);
    Event e{"crawl.added", fmt::format("crawl added ({} URL{})", url_count, url_count == 1 ? "" : "s"), id};
    e.detail = {{"urls", url_count}, {"max_depth", crawl.max_depth}};
    if (crawl.label) {
        e.detail["label"] = *crawl.label;
    }
    record_event(tx, "cli", e);
    tx.commit();
    std::cout << id << std::endl;
}

} // namespace orch
