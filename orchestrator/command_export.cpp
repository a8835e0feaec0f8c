#include "orchestrator/commands.hpp"

#include "common/base/errors.hpp"
#include "common/base/ids.hpp"
#include "common/base/log.hpp"
#include "common/work/crawl_export.hpp"
#include "orchestrator/ops_session.hpp"

#include <fmt/format.h>

#include <iostream>

namespace orch {

void command_export(const CommonOptions& options, const ExportOptions& exp)
{
    const auto id = require_uuid(exp.crawl_id, "crawl id");
    if (exp.wacz.empty()) {
        throw InvalidInput("export: --wacz FILE is required");
    }
    OpsSession session(options, OpsSession::Schema::current);
    std::vector<std::string> notes;
    const auto result = export_crawl_wacz(session.conn(), id, data_dir_path(options), exp.wacz, true, notes);
    // The cuts and the files left out are the operator's to know, not failures.
    for (const auto& note : notes) {
        std::cerr << "export: " << note << '\n';
    }
    std::cout << fmt::format("{}: {} index lines, {} bytes\n", exp.wacz, result.index_lines, result.bytes);
}

} // namespace orch
