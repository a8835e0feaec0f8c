#include "snapshot_worker/snapshot_worker.hpp"

#include "common/database.hpp"
#include "common/errors.hpp"
#include "common/ids.hpp"
#include "common/migrate.hpp"

#include <fmt/format.h>

namespace orch {

ExitCode run_snapshot_worker(const CommonOptions& common, const SnapshotWorkerOptions& options)
{
    auto snapshot_id = require_uuid(options.snapshot_id, "snapshot id");
    auto data_dir = prepare_data_dir(common);
    auto db = Database::open(common, data_dir);
    require_current_schema(db.conn());
    {
        pqxx::read_transaction tx(db.conn());
        if (tx.exec_params("SELECT 1 FROM snapshot WHERE id = $1", snapshot_id).empty()) {
            throw NotFound(fmt::format("snapshot {} not found", snapshot_id));
        }
    }
    throw Error(ExitCode::internal_error, "snapshot_worker: running hooks is not implemented yet");
}

} // namespace orch
