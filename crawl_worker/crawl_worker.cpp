#include "crawl_worker/crawl_worker.hpp"

#include "common/database.hpp"
#include "common/errors.hpp"
#include "common/ids.hpp"
#include "common/migrate.hpp"

#include <fmt/format.h>

namespace orch {

ExitCode run_crawl_worker(const CommonOptions& common, const CrawlWorkerOptions& options)
{
    auto crawl_id = require_uuid(options.crawl_id, "crawl id");
    auto data_dir = prepare_data_dir(common);
    auto db = Database::open(common, data_dir);
    require_current_schema(db.conn());
    {
        pqxx::read_transaction tx(db.conn());
        if (tx.exec_params("SELECT 1 FROM crawl WHERE id = $1", crawl_id).empty()) {
            throw NotFound(fmt::format("crawl {} not found", crawl_id));
        }
    }
    throw Error(ExitCode::internal_error, "crawl_worker: running crawls is not implemented yet");
}

} // namespace orch
