#include "orchestrator/commands.hpp"

#include "common/db/database.hpp"
#include "common/db/database_outage.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/ids.hpp"
#include "common/base/log.hpp"
#include "common/db/migrate.hpp"
#include "common/base/random_id.hpp"
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
    crawl.scope = add.scope;
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

    // The id is made here, not by the server, so that a commit in doubt (the
    // connection lost between the server's commit and its reply) is retried
    // into the row it made instead of into a second crawl.
    const auto id = add.id.empty() ? random_uuid() : require_uuid(add.id, "crawl id");

    auto data_dir = prepare_data_dir(options);
    auto db = Database::open(options, data_dir);
    apply_migrations(db.conn());
    // A lost connection is waited for and the add retried, as the workers do.
    set_outage_policy({outage_grace_from_env(), -1, {}, {}, {}});
    int tries = 0;
    const auto added = ride_out_transaction(db.conn(), [&](pqxx::work& tx) {
        ++tries;
        auto enqueued = enqueue_crawl(tx, crawl, id);
        if (enqueued.created) {
            Event e{"crawl.added", fmt::format("crawl added ({} URL{})", url_count, url_count == 1 ? "" : "s"), id};
            e.detail = {{"urls", url_count}, {"max_depth", crawl.max_depth}, {"scope", crawl.scope}};
            if (crawl.label) {
                e.detail["label"] = *crawl.label;
            }
            record_event(tx, "cli", e);
        }
        return enqueued;
    });
    // After a retry, a crawl found in place is this command's own earlier commit.
    if (!added.created && tries == 1) {
        log::info("crawl exists already with these URLs and settings: nothing added", {{"crawl_id", id}});
    }
    std::cout << added.id << std::endl;
}

} // namespace orch
