#include "orchestrator/ops_commands.hpp"

#include "orchestrator/ops_session.hpp"
#include "common/db/event_journal.hpp"
#include "orchestrator/age_option.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

namespace orch {
namespace {

constexpr long k_batch = 5000;

// Exited rows ended before the cutoff that nothing still needs: no lease names them
// and no descendant is still queued or running (its tree link would be cut).
constexpr const char* k_candidates =
    "p.status = 'exited' AND p.ended_at < now() - $1::interval "
    "AND NOT EXISTS (SELECT 1 FROM crawl c WHERE c.lease_owner = p.id) "
    "AND NOT EXISTS (SELECT 1 FROM snapshot s WHERE s.lease_owner = p.id) "
    "AND NOT EXISTS (SELECT 1 FROM process ch WHERE ch.parent_id = p.id AND ch.status <> 'exited')";

} // namespace

void command_prune(const CommonOptions& options, const PruneOptions& prune)
{
    auto age = parse_age(prune.older_than, "--older-than");
    // Children of a deleted row keep their history; parent_id becomes NULL (trigger process_unparent).
    OpsSession session(options, OpsSession::Schema::migrated,
                       {{"prune_count", fmt::format("SELECT count(*) FROM process p WHERE {}", k_candidates)},
                        {"prune_batch", fmt::format("DELETE FROM process WHERE id IN ("
                                                    "  SELECT p.id FROM process p WHERE {} LIMIT $2 FOR UPDATE SKIP "
                                                    "LOCKED) RETURNING stdout_path, stderr_path",
                                                    k_candidates)}});
    auto& conn = session.conn();
    if (prune.dry_run) {
        pqxx::read_transaction tx(conn);
        auto n = tx.exec_prepared1("prune_count", age)[0].as<long>();
        std::cout << fmt::format("would delete {} exited process rows older than {} and their log files\n", n, age);
        return;
    }
    long rows = 0;
    long files = 0;
    std::uintmax_t bytes = 0;
    for (;;) {
        std::vector<std::string> paths;
        {
            pqxx::work tx(conn);
            auto r = tx.exec_prepared("prune_batch", age, k_batch);
            for (const auto& row : r) {
                for (int col = 0; col < 2; ++col) {
                    if (!row[col].is_null()) {
                        paths.push_back(row[col].as<std::string>());
                    }
                }
            }
            tx.commit();
            rows += static_cast<long>(r.size());
            if (r.empty()) {
                break;
            }
        }
        // The rows are gone first: a crash here leaves files, never rows naming missing files.
        for (const auto& path : paths) {
            std::error_code ec;
            auto status = std::filesystem::symlink_status(path, ec);
            if (ec || !std::filesystem::is_regular_file(status)) {
                continue;
            }
            auto size = std::filesystem::file_size(path, ec);
            if (std::filesystem::remove(path, ec) && !ec) {
                ++files;
                bytes += size;
            }
        }
    }
    // The journal keeps the same horizon.
    long events = 0;
    {
        pqxx::work tx(conn);
        events = static_cast<long>(
            tx.exec_params("DELETE FROM event WHERE at < now() - $1::interval", age).affected_rows());
        Event e{"process.pruned",
                fmt::format("pruned {} exited process rows older than {} ({} log files, {} bytes)", rows, age, files,
                            bytes)};
        e.detail = {{"older_than", age}, {"rows", rows}, {"files", files}, {"bytes", bytes}, {"events", events}};
        record_event(tx, "cli", e);
        tx.commit();
    }
    std::cout << fmt::format("deleted {} exited process rows older than {} and {} log files ({} bytes), {} events\n",
                             rows, age, files, bytes, events);
}

} // namespace orch
