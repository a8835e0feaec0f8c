#include "crawl_worker/crawl_store.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/base/log.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace orch {
namespace {

// The crawl-lease fence; FOR SHARE makes a concurrent claim wait for our commit.
constexpr const char* k_fence = "EXISTS (SELECT 1 FROM crawl f WHERE f.id = $1 AND f.lease_owner = $2 FOR SHARE)";

} // namespace

CrawlStore::CrawlStore(pqxx::connection& conn, std::string crawl_id) : m_conn(conn), m_crawl_id(std::move(crawl_id))
{
}

namespace {

// A row of load()'s statement, by its column numbers.
CrawlRecord crawl_record(const pqxx::row& row)
{
    CrawlRecord c;
    c.id = row[0].as<std::string>();
    c.first_url = row[1].as<std::string>();
    c.max_depth = row[2].as<int>();
    if (!row[3].is_null()) {
        c.max_urls = row[3].as<int>();
    }
    if (!row[4].is_null()) {
        c.timeout_s = row[4].as<int>();
    }
    c.host_limited = row[10].as<bool>();
    if (!row[11].is_null()) {
        c.host_delay_s = row[11].as<double>();
    }
    c.status = row[5].as<std::string>();
    c.config = nlohmann::json::parse(row[6].as<std::string>());
    c.cancel_requested = row[7].as<bool>();
    c.started_seconds_ago = row[8].as<double>();
    c.url_count = row[9].as<long>();
    return c;
}

} // namespace

std::optional<CrawlRecord> CrawlStore::load()
{
    return ride_out_transaction(m_conn, [&](pqxx::read_transaction& tx) -> std::optional<CrawlRecord> {
        // Only the first URL and the count: a crawl of many URLs would otherwise sit
        // in this process's heap (twice, as JSON and as strings) for its whole life.
        auto r = tx.exec_params("SELECT id, coalesce(urls[1], ''), max_depth, max_urls, timeout_s, status, "
                                " config::text, cancel_requested_at IS NOT NULL, "
                                " coalesce(extract(epoch FROM now() - started_at) - paused_s, 0), cardinality(urls), "
                                " max_per_host IS NOT NULL OR host_delay_s IS NOT NULL, host_delay_s "
                                "FROM crawl WHERE id = $1",
                                m_crawl_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return crawl_record(r[0]);
    });
}

void CrawlStore::require_lease(pqxx::work& tx, const char* what) const
{
    if (tx.exec_params(fmt::format("SELECT 1 WHERE {}", k_fence), m_crawl_id, m_owner).empty()) {
        throw LeaseLost(fmt::format("lost the lease on crawl {} while {}", m_crawl_id, what));
    }
}

int CrawlStore::create_seed_snapshots(std::optional<int> max_urls)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) -> int {
        require_lease(tx, "creating snapshots");
        auto r = tx.exec_params1("WITH created AS ("
                                 "  INSERT INTO snapshot (crawl_id, url, depth) "
                                 "  SELECT c.id, u.url, 0 FROM crawl c, unnest(c.urls) WITH ORDINALITY AS u(url, n) "
                                 "  WHERE c.id = $1 AND ($2::integer IS NULL OR u.n <= $2::integer) "
                                 "  ORDER BY u.n "
                                 "  ON CONFLICT (crawl_id, url) DO NOTHING RETURNING 1) "
                                 "SELECT count(*) FROM created",
                                 m_crawl_id, max_urls);
        return r[0].as<int>();
    });
}

long CrawlStore::unsealed_count()
{
    // One statement in autocommit: one round trip, where a read-only transaction takes three.
    return exec_autocommit(m_conn, "crawl_store.unsealed_count",
                           "SELECT count(*) FROM snapshot WHERE crawl_id = $1 AND status <> 'sealed'", m_crawl_id)[0][0]
        .as<long>();
}

CrawlStore::Control CrawlStore::control()
{
    return ride_out_transaction(m_conn, [&](pqxx::read_transaction& tx) {
        auto r = tx.exec_params("SELECT cancel_requested_at IS NOT NULL, status = 'paused' FROM crawl WHERE id = $1",
                                m_crawl_id);
        Control c;
        if (!r.empty()) {
            c.cancel_requested = r[0][0].as<bool>();
            c.paused = r[0][1].as<bool>();
        }
        return c;
    });
}

bool CrawlStore::pause_refused(const std::optional<std::string>& lease_holder, const std::optional<std::string>& cookie,
                               const std::string& problem)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) -> bool {
        if (!work_states::pause_refused_crawl(tx, m_crawl_id, lease_holder, cookie)) {
            return false;
        }
        Event e{"crawl.paused", "crawl paused: its configuration is refused: " + problem, m_crawl_id};
        e.detail = {{"reason", "configuration refused"}, {"problem", problem}};
        record_event(tx, "crawl_worker", e);
        return true;
    });
}

void CrawlStore::release_unstarted(const std::optional<std::string>& lease_holder,
                                   const std::optional<std::string>& cookie)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) {
        work_states::release_unstarted_crawl(tx, m_crawl_id, lease_holder, cookie);
    });
}

std::vector<std::string> CrawlStore::held_by(const std::string& worker)
{
    return ride_out_transaction(m_conn, [&](pqxx::nontransaction& tx) -> std::vector<std::string> {
        // One read: autocommit. A batch is claimed in the order its snapshots run.
        auto r = tx.exec_params("SELECT id FROM snapshot WHERE crawl_id = $1 AND lease_owner = $2 AND status <> 'sealed' "
                                "ORDER BY started_at, depth, retry_at, created_at",
                                m_crawl_id, worker);
        std::vector<std::string> out;
        for (const auto& row : r) {
            out.push_back(row[0].as<std::string>());
        }
        return out;
    });
}

bool CrawlStore::retry_or_fail(const std::string& snapshot_id, const std::string& dead_worker, int deaths,
                               int max_attempts, std::chrono::seconds backoff, const std::string& reason)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) -> bool {
        require_lease(tx, "retrying a snapshot");
        // Only a lease that the dead worker held (or none) is ours to clear.
        auto row = tx.exec_params("SELECT attempts FROM snapshot WHERE id = $1 AND crawl_id = $2 AND status <> 'sealed' "
                                  "  AND (lease_owner IS NULL OR lease_owner = $3) FOR UPDATE",
                                  snapshot_id, m_crawl_id, dead_worker);
        if (row.empty()) {
            // Sealed already, or someone else's lease. Sealed by us: this very
            // call committed on an earlier try whose reply was lost (ride_out).
            return !tx.exec_params("SELECT 1 FROM snapshot WHERE id = $1 AND status = 'sealed' AND sealed_by = $2",
                                   snapshot_id, m_owner)
                        .empty();
        }
        int attempts = std::max(row[0][0].as<int>(), deaths);
        bool sealed = attempts >= max_attempts;
        if (sealed) {
            auto error = fmt::format("gave up after {} attempts: {}", attempts, reason);
            Event e{"snapshot.gave_up", "snapshot sealed failed: " + error, m_crawl_id, snapshot_id};
            e.process_id = m_owner;
            e.detail = {{"attempts", attempts}, {"worker", dead_worker}};
            record_event(tx, "crawl_worker", e);
            tx.exec_params0("UPDATE archive_result SET status = 'failed', error = $2, end_ts = now(), modified_at = now() "
                            "WHERE snapshot_id = $1 AND status IN ('queued', 'started')",
                            snapshot_id, error);
            work_states::seal_snapshot_failed(tx, snapshot_id, error, m_owner);
        } else {
            tx.exec_params0("UPDATE archive_result SET status = 'queued', error = $2, modified_at = now() "
                            "WHERE snapshot_id = $1 AND status = 'started'",
                            snapshot_id, "interrupted: " + reason);
            work_states::retry_snapshot_later(tx, snapshot_id, reason, backoff);
        }
        return sealed;
    });
}

void CrawlStore::give_back_unspent(const std::string& snapshot_id, const std::string& worker,
                                   const std::string& reason)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) {
        require_lease(tx, "giving back a snapshot");
        work_states::give_back_snapshot(tx, snapshot_id, m_crawl_id, worker, reason);
    });
}

int CrawlStore::seal_unsealed(const std::string& outcome, const std::string& reason)
{
    return ride_out_transaction(m_conn, [&](pqxx::work& tx) -> int {
        require_lease(tx, "sealing snapshots");
        tx.exec_params0("UPDATE archive_result ar SET status = 'failed', error = $2, end_ts = now(), modified_at = now() "
                        "FROM snapshot s WHERE s.id = ar.snapshot_id AND s.crawl_id = $1 AND s.status <> 'sealed' "
                        "  AND ar.status IN ('queued', 'started')",
                        m_crawl_id, reason);
        return work_states::seal_unsealed_snapshots(tx, m_crawl_id, outcome, reason, m_owner);
    });
}

namespace {

// The seal (work_states::crawl_seal), its journal entry and `exits` held process
// exits in one durable statement: the crawl's seal is the durable point, and on
// the path from its last snapshot to a sealed crawl.
ChangeStatement seal_statement(std::size_t exits)
{
    static const auto ctes = process_table::exits_variants([](std::size_t count) {
        return process_table::exits_ctes(count, work_states::k_crawl_seal_parameters + 1);
    });
    return work_states::crawl_seal("crawl_store.seal." + process_table::exits_variant_name(exits),
                                   ctes[process_table::exits_variant(exits)]);
}

} // namespace

void CrawlStore::prepare_seal()
{
    return ride_out(m_conn, [&]() {
        prepare_event_with_change(m_conn, seal_statement(1), work_states::k_crawl_seal_parameters + process_table::exits_parameter_count(1));
    });
}

std::string CrawlStore::seal(const std::optional<std::string>& forced, const std::optional<std::string>& reason,
                             const std::vector<process_table::HeldExit>& exits)
{
    const auto statement = seal_statement(exits.size());
    std::vector<std::optional<std::string>> params{m_crawl_id, m_owner, forced, reason};
    const auto more = process_table::exits_parameters(exits);
    params.insert(params.end(), more.begin(), more.end());
    Event e{"crawl.sealed", "crawl sealed", m_crawl_id};
    e.process_id = m_owner;
    const auto sealed = record_event_with_change(m_conn, statement, std::move(params), "crawl_worker", e);
    if (!sealed.empty()) {
        return sealed[0][0].as<std::string>();
    }
    // The lease is gone: maybe because this seal committed on an earlier try
    // whose reply was lost with the connection (ride_out ran it again).
    auto ours = work_states::sealed_outcome_by(m_conn, LeaseTable::crawl, m_crawl_id, m_owner);
    if (!ours) {
        throw LeaseLost(fmt::format("lost the lease on crawl {} while sealing it", m_crawl_id));
    }
    log::info("crawl seal found committed by an earlier try", {{"crawl_id", m_crawl_id}});
    return *ours;
}

} // namespace orch
