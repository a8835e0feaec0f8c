#include "snapshot_worker/snapshot_store.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/base/errors.hpp"
#include "common/base/json_text.hpp"
#include "common/base/log.hpp"
#include "common/recorder/process_table.hpp"
#include "common/work/snapshot_claims.hpp"
#include "common/work/snapshot_index.hpp"
#include "common/work/work_states.hpp"
#include "snapshot_worker/seal_statements.hpp"

#include <fmt/format.h>

namespace orch {
namespace {

// The snapshot's bookkeeping, its seal included, does not wait for the WAL
// flush: a PostgreSQL crash can lose the last few hundred milliseconds of it
// (wal_writer_delay), which only reruns those hooks, or the whole snapshot if its
// seal was lost (at-least-once, as after a worker crash; a succeeded result that
// survived is not rerun). The durable point is the crawl's seal, which commits
// synchronously: the WAL being sequential, it cannot survive a crash that the
// seals of its snapshots did not. Each write is one prepared statement in
// autocommit (exec_autocommit, k_async_commit): one round trip.

// Appended to every write: the statement matches nothing unless we still hold the
// snapshot's lease. FOR SHARE makes a concurrent claim wait for our commit, so a
// write can never land after the lease changed hands.
// The owner is compared as `(lease_owner = $2) IS TRUE`, which means the same but
// is no index condition: written plainly, a cached generic plan may find the row
// through snapshot_leased_idx (lease_owner) instead of its key, and every
// snapshot a worker sealed left an entry under its owner id there until the next
// vacuum: measured, the seal's scan grew from 5 to 54 buffers over a worker's
// 250 snapshots, linear in the snapshots it sealed.
constexpr const char* k_fence =
    "EXISTS (SELECT 1 FROM snapshot f WHERE f.id = $1 AND (f.lease_owner = $2) IS TRUE FOR SHARE)";

std::string dumped(const nlohmann::json& j)
{
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

SnapshotStore::SnapshotStore(pqxx::connection& conn, std::string snapshot_id, std::string crawl_id)
    : m_conn(conn), m_snapshot_id(std::move(snapshot_id)), m_crawl_id(std::move(crawl_id))
{
}

namespace {

// A row of load()'s statement, by its column numbers.
SnapshotRecord snapshot_record(const pqxx::row& row)
{
    SnapshotRecord rec;
    rec.id = row[0].as<std::string>();
    rec.crawl_id = row[1].as<std::string>();
    rec.url = row[2].as<std::string>();
    rec.depth = row[3].as<int>();
    rec.status = row[4].as<std::string>();
    rec.max_depth = row[5].as<int>();
    if (!row[6].is_null()) {
        rec.max_urls = row[6].as<int>();
    }
    rec.crawl_config = nlohmann::json::parse(row[7].as<std::string>());
    rec.crawl_cancelled = row[8].as<bool>();
    rec.host_limited = row[9].as<bool>();
    // A value the migration's CHECK allows; anything else would be a newer
    // binary's mode, and following every link is what crawls did before scopes.
    rec.scope = parse_scope_mode(row[10].as<std::string>()).value_or(ScopeMode::any);
    rec.seeds = nlohmann::json::parse(row[11].as<std::string>()).get<std::vector<std::string>>();
    return rec;
}

} // namespace

std::optional<SnapshotRecord> SnapshotStore::load()
{
    auto rec = ride_out_transaction(m_conn, [&](pqxx::nontransaction& tx) -> std::optional<SnapshotRecord> {
        // One statement: autocommit, no BEGIN/ROLLBACK round trips.
        auto r = tx.exec_params("SELECT s.id, s.crawl_id, s.url, s.depth, s.status, c.max_depth, c.max_urls, "
                                "       c.config::text, c.cancel_requested_at IS NOT NULL OR coalesce(c.outcome = 'cancelled', false), "
                                "       c.max_per_host IS NOT NULL OR c.host_delay_s IS NOT NULL, c.scope, array_to_json(c.urls)::text "
                                "FROM snapshot s JOIN crawl c ON c.id = s.crawl_id WHERE s.id = $1",
                                m_snapshot_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return snapshot_record(r[0]);
    });
    if (rec) {
        m_crawl_id = rec->crawl_id;
    }
    return rec;
}

void SnapshotStore::require(const pqxx::result& r, const char* what) const
{
    if (r.affected_rows() == 0 && r.empty()) {
        throw LeaseLost(fmt::format("lost the lease on snapshot {} while {}", m_snapshot_id, what));
    }
}

std::map<std::string, ResultState> SnapshotStore::ensure_results(const std::vector<Hook>& hooks)
{
    // One statement: the fence, the inserts and every result. The outer SELECT does
    // not see the CTE's inserts (one snapshot per statement), so the new rows come
    // from RETURNING and the existing ones from the table; a row with a NULL hook
    // name says the fence held.
    auto rows = exec_autocommit(
        m_conn, "snapshot_store.ensure_results",
        fmt::format("WITH fence AS (SELECT 1 FROM snapshot f, {} WHERE f.id = $1 AND (f.lease_owner = $2) IS TRUE "
                    "               FOR SHARE OF f), "
                    "ins AS ({}) "
                    "SELECT NULL::text, NULL::text, NULL::text WHERE EXISTS (SELECT 1 FROM fence) "
                    "UNION ALL SELECT hook_name, id::text, status FROM ins "
                    "UNION ALL SELECT hook_name, id::text, status FROM archive_result "
                    "  WHERE snapshot_id = $1 AND EXISTS (SELECT 1 FROM fence)",
                    k_async_commit, seal_sql::create_results("$1", "", "$3", "WHERE EXISTS (SELECT 1 FROM fence)")),
        m_snapshot_id, m_owner, seal_sql::hooks_json(hooks));
    std::map<std::string, ResultState> out;
    bool fenced = false;
    for (const auto& row : rows) {
        if (row[0].is_null()) {
            fenced = true;
            continue;
        }
        out[row[0].as<std::string>()] = ResultState{row[1].as<std::string>(), row[2].as<std::string>()};
    }
    if (!fenced) {
        throw LeaseLost(fmt::format("lost the lease on snapshot {} while creating archive results", m_snapshot_id));
    }
    return out;
}

void SnapshotStore::mark_started(const std::string& result_id, const std::string& process_id)
{
    m_writes.started(result_id, process_id, ResultWriteBehind::Clock::now());
}

void SnapshotStore::record(const std::string& result_id, const HookResult& result, const OutputFiles& files)
{
    m_writes.finished(result_id, result, files, ResultWriteBehind::Clock::now());
}

void SnapshotStore::flush_results(bool all)
{
    auto writes = m_writes.take(all ? ResultWriteBehind::Clock::time_point::max() : ResultWriteBehind::Clock::now());
    if (writes == "[]") {
        return;
    }
    static const std::string sql = fmt::format("{} FROM {}, {} WHERE a.id = w.id AND a.snapshot_id = $1 AND {} RETURNING 1",
                                               seal_sql::k_write_held, seal_sql::held_writes("$3"), k_async_commit, k_fence);
    auto r = exec_autocommit(m_conn, "snapshot_store.flush_results", sql, m_snapshot_id, m_owner, writes);
    require(r, "recording results");
}

void SnapshotStore::requeue(const std::string& result_id, const std::string& why)
{
    flush_results(true);
    auto r = exec_autocommit(m_conn, "snapshot_store.requeue",
                             fmt::format("UPDATE archive_result SET status = 'queued', error = $4, end_ts = now(), "
                                         " modified_at = now() FROM {} "
                                         "WHERE id = $3 AND snapshot_id = $1 AND {} RETURNING 1",
                                         k_async_commit, k_fence),
                             m_snapshot_id, m_owner, result_id, why);
    require(r, "requeueing a result");
}

void SnapshotStore::set_title(const std::string& title)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) {
        auto r = tx.exec_params("UPDATE snapshot SET title = $3, modified_at = now() "
                                "WHERE id = $1 AND (lease_owner = $2) IS TRUE RETURNING 1",
                                m_snapshot_id, m_owner, title);
        require(r, "setting the title");
    });
}

int SnapshotStore::add_children(const FilteredUrls& urls, int depth, std::optional<int> max_urls)
{
    if (urls.accepted.empty() && urls.skipped.empty()) {
        return 0;
    }
    // The room goes to the page's first URLs that the crawl does not have yet: cut
    // before the filter, links to known pages (a site's menu on every page) would
    // use it up and new URLs would be dropped for good.
    // Then inserted in URL order, whatever the page's: without max_urls nothing
    // serialises two workers adding the same URLs, and each waits on the other's
    // uncommitted row of a URL it reaches; in two different orders they would
    // deadlock, in one order the later waits for the earlier and skips its rows.
    // The skipped URLs follow the children (each step reads the one before, so
    // that every writer takes its row locks in the same order: children by
    // URL, skipped by URL, counts by reason). The list's room is read once per
    // page: two pages at once may both fill its last room.
    static const std::string k_add_children =
        "WITH fresh AS ("
        "  SELECT u.url FROM jsonb_array_elements_text($4::jsonb) WITH ORDINALITY AS u(url, n) "
        "  WHERE NOT EXISTS (SELECT 1 FROM snapshot s WHERE s.crawl_id = $1 AND s.url = u.url) "
        "  GROUP BY u.url ORDER BY min(u.n) LIMIT $5), "
        "children AS (INSERT INTO snapshot (crawl_id, parent_snapshot_id, url, depth) "
        "  SELECT $1, $2, url, $3 FROM fresh ORDER BY url "
        "  ON CONFLICT (crawl_id, url) DO NOTHING RETURNING 1), "
        "added AS (SELECT count(*) AS n FROM children), "
        "skipped AS (SELECT k.url, k.reason, row_number() OVER (ORDER BY k.url) AS n "
        "  FROM jsonb_to_recordset($6::jsonb) AS k(url text, reason text) "
        "  WHERE NOT EXISTS (SELECT 1 FROM crawl_skipped_url l WHERE l.crawl_id = $1 AND l.url = k.url)), "
        "room AS (SELECT $7::bigint - count(*) AS n FROM (SELECT 1 FROM crawl_skipped_url "
        "  WHERE crawl_id = $1 AND (SELECT n FROM added) >= 0 LIMIT $7) l), "
        "listed AS (INSERT INTO crawl_skipped_url (crawl_id, url, reason, found_on) "
        "  SELECT $1, k.url, k.reason, $2 FROM skipped k, room WHERE k.n <= room.n ORDER BY k.url "
        "  ON CONFLICT (crawl_id, url) DO NOTHING RETURNING 1), "
        "counted AS (INSERT INTO crawl_skipped_count (crawl_id, reason, unlisted) "
        "  SELECT $1, k.reason, count(*) FROM skipped k, room "
        "  WHERE k.n > room.n AND (SELECT count(*) FROM listed) >= 0 GROUP BY k.reason ORDER BY k.reason "
        "  ON CONFLICT (crawl_id, reason) DO UPDATE SET unlisted = crawl_skipped_count.unlisted + excluded.unlisted) "
        "SELECT n FROM added";
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : urls.skipped) {
        skipped.push_back({{"url", s.url}, {"reason", s.reason}});
    }
    const auto accepted = dumped(nlohmann::json(urls.accepted));
    const auto skipped_json = dumped(skipped);
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) -> int {
        auto fence = tx.exec_params(fmt::format("SELECT 1 WHERE {}", k_fence), m_snapshot_id, m_owner);
        require(fence, "adding discovered snapshots");
        std::optional<long> room; // none: no limit (LIMIT NULL)
        if (max_urls) {
            // The crawl row lock serialises concurrent discoverers, so the limit holds exactly.
            tx.exec_params1("SELECT 1 FROM crawl WHERE id = $1 FOR UPDATE", m_crawl_id);
            auto existing = tx.exec_params1("SELECT count(*) FROM snapshot WHERE crawl_id = $1", m_crawl_id)[0].as<long>();
            room = std::max(0L, static_cast<long>(*max_urls) - existing);
        }
        tx.conn().prepare("snapshot_store.add_children", k_add_children);
        auto r = tx.exec_prepared1("snapshot_store.add_children", m_crawl_id, m_snapshot_id, depth, accepted, room,
                                   skipped_json, k_skipped_listed);
        return r[0].as<int>();
    });
}

namespace {

// The claimed snapshot at column `first` of `row` (claimed_snapshot's columns,
// then the results as a JSON object hook id -> [id, status]) into `out`.
void read_next(const pqxx::row& row, pqxx::row::size_type first, SnapshotStore::SealAndNext& out)
{
    out.next = claimed_snapshot(row, first);
    out.next_results = seal_sql::results_of(row[first + 6]);
}

} // namespace

std::string SnapshotStore::held_results()
{
    return m_writes.take(ResultWriteBehind::Clock::time_point::max());
}

std::string SnapshotStore::seal(const std::vector<process_table::HeldExit>& exits)
{
    static const auto make = [](bool held_none) {
        return process_table::exits_variants([held_none](std::size_t count) {
            return "WITH " + process_table::exits_ctes(count, 4) +
                   work_states::seal_snapshot_ctes(seal_sql::result_seal("$1", "$3", held_none), "$2") +
                   " SELECT outcome FROM sealed";
        });
    };
    const auto writes = held_results();
    const bool none = writes == "[]";
    const auto& statements = [none]() -> const auto& {
        if (none) {
            static const auto held_none = make(true);
            return held_none;
        }
        static const auto with_held = make(false);
        return with_held;
    }();
    auto r = exec_autocommit_params(m_conn,
                                    "snapshot_store.seal." + process_table::exits_variant_name(exits.size()) +
                                        (none ? ".none_held" : ""),
                                    statements[process_table::exits_variant(exits.size())],
                                    seal_sql::seal_parameters({m_snapshot_id, m_owner, writes}, exits));
    auto outcome = r.empty() ? sealed_already() : r[0][0].as<std::string>();
    write_index();
    return outcome;
}

void SnapshotStore::write_index()
{
    if (!m_index_dir.empty()) {
        write_snapshot_index(m_conn, m_snapshot_id, m_index_dir);
    }
}

std::string SnapshotStore::sealed_already()
{
    // The seal statement matched nothing: the lease is gone. It may be gone
    // because this very seal committed on an earlier try and the reply was lost
    // with the connection (ride_out ran it again): then the row says we sealed it.
    auto ours = work_states::sealed_outcome_by(m_conn, LeaseTable::snapshot, m_snapshot_id, m_owner);
    if (!ours) {
        throw LeaseLost(fmt::format("lost the lease on snapshot {} while sealing", m_snapshot_id));
    }
    log::info("snapshot seal found committed by an earlier try", {{"snapshot_id", m_snapshot_id}});
    return *ours;
}

SnapshotStore::SealAndNext SnapshotStore::seal_and_claim_next(const std::string& crawl_owner,
                                                              std::chrono::seconds ttl,
                                                              const std::vector<process_table::HeldExit>& exits,
                                                              const std::vector<Hook>& hooks, bool host_limited)
{
    // A continuing worker's step between two snapshots in one statement: the
    // claim only happens if the seal did (the gate), and only takes a free lease;
    // the claimed snapshot gets its results as ensure_results() would make them
    // (the claim in this very statement is their fence). The rows it had already
    // (a retried snapshot) come from the table as it was before the statement,
    // the new ones from RETURNING. Our own process row (the claim's owner, $8)
    // is pointed at the claimed snapshot by its key.
    // Four sets of statements: with and without the host gate of a crawl that has
    // a per-host rule (ClaimScope::host_limited), with and without held results
    // (seal_sql::result_seal); each is built at its first use.
    static const auto make = [](bool with_host_gate, bool held_none) {
        return process_table::exits_variants([with_host_gate, held_none](std::size_t count) {
            work_states::SealAndClaim statement;
            statement.leading_ctes = process_table::exits_ctes(count, 11);
            statement.seals = {seal_sql::result_seal("$7", "$9", held_none)};
            statement.owner = "$8";
            statement.select =
                ", prepared AS (" + seal_sql::create_results("c.id", "claimed c, ", "$10", "") + "), "
                "next_results AS (SELECT jsonb_object_agg(r.hook_name, jsonb_build_array(r.id, r.status))::text "
                "  AS results FROM (SELECT hook_name, id, status FROM prepared "
                "        UNION ALL SELECT a.hook_name, a.id, a.status FROM archive_result a "
                "        JOIN claimed c ON a.snapshot_id = c.id) r) "
                "SELECT sealed.outcome, claimed.*, next_results.results FROM sealed LEFT JOIN claimed ON true, "
                "next_results";
            statement.host_limited = with_host_gate;
            return work_states::seal_and_claim_statement(statement);
        });
    };
    const auto writes = held_results();
    const bool none = writes == "[]";
    const auto& statements = [host_limited, none]() -> const auto& {
        if (host_limited && none) {
            static const auto gated_none = make(true, true);
            return gated_none;
        }
        if (host_limited) {
            static const auto gated = make(true, false);
            return gated;
        }
        if (none) {
            static const auto plain_none = make(false, true);
            return plain_none;
        }
        static const auto plain = make(false, false);
        return plain;
    }();
    ClaimScope free_only;
    free_only.take_expired = false;
    const auto p = claim_parameters(m_crawl_id, crawl_owner, {m_owner}, ttl, free_only);
    const auto variant = process_table::exits_variant(exits.size());
    auto r = exec_claim(m_conn,
                        "snapshot_store.seal_and_claim_next." + process_table::exits_variant_name(exits.size()) +
                            (host_limited ? ".hosts" : "") + (none ? ".none_held" : ""),
                        statements[variant],
                        seal_sql::seal_parameters({p[0], p[1], p[2], p[3], p[4], p[5], m_snapshot_id, m_owner, writes,
                                         seal_sql::hooks_json(hooks)},
                                        exits),
                        m_crawl_id, host_limited);
    if (r.empty()) {
        // As in seal(): if the statement committed on an earlier try, so did its
        // claim, and the snapshot it claimed is leased to us.
        SealAndNext out;
        out.outcome = sealed_already();
        auto next = exec_autocommit(
            m_conn, "snapshot_store.claimed_already",
            "SELECT s.id, s.lease_owner, s.attempts, 1, s.url, s.depth, "
            "  (SELECT jsonb_object_agg(a.hook_name, jsonb_build_array(a.id, a.status))::text "
            "   FROM archive_result a WHERE a.snapshot_id = s.id) "
            "FROM snapshot s WHERE s.crawl_id = $1 AND (s.lease_owner = $2) IS TRUE AND s.status <> 'sealed' "
            "ORDER BY s.started_at DESC LIMIT 1",
            m_crawl_id, m_owner);
        if (!next.empty()) {
            read_next(next[0], 0, out);
        }
        write_index();
        return out;
    }
    SealAndNext out;
    out.outcome = r[0][0].as<std::string>();
    if (!r[0][1].is_null()) {
        read_next(r[0], 1, out);
    }
    write_index();
    return out;
}

} // namespace orch
