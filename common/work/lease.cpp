#include "common/db/database_outage.hpp"
#include "common/work/lease.hpp"

#include "common/db/autocommit_statement.hpp"
#include "common/config/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace orch {
namespace {

// Table names come from the enum, never from input, so composing them is safe.
const char* table_name(LeaseTable table)
{
    return table == LeaseTable::crawl ? "crawl" : "snapshot";
}

} // namespace

Lease::Lease(LeaseTable table, std::string item_id, std::string owner, std::chrono::seconds ttl, int attempts)
    : m_table(table), m_item_id(std::move(item_id)), m_owner(std::move(owner)), m_ttl(ttl), m_attempts(attempts)
{
}

std::optional<Lease> Lease::claim(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                  const std::string& owner, std::chrono::seconds ttl)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(
            fmt::format("UPDATE {} SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3), "
                        " status = CASE WHEN status = 'queued' THEN 'started' ELSE status END, "
                        " started_at = coalesce(started_at, now()), attempts = attempts + 1, modified_at = now() "
                        "WHERE id = $1 AND status IN ('queued', 'started') "
                        "  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now()) "
                        "RETURNING attempts",
                        table_name(table)),
            item_id, owner, static_cast<double>(ttl.count()));
    });
    if (r.empty()) {
        return std::nullopt;
    }
    return Lease(table, item_id, owner, ttl, r[0][0].as<int>());
}

std::optional<Lease> Lease::adopt(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                  const std::string& owner, std::chrono::seconds ttl)
{
    // The owner is matched as `(lease_owner = $2) IS TRUE` here, in renew() and
    // in release(): the row is found by its key, never through the lease_owner
    // index, which holds an entry per item the owner ever held until a vacuum
    // (snapshot_worker/snapshot_store.cpp, k_fence).
    // Not waiting for the WAL flush is safe: adopting changes no owner, only the
    // expiry. Lost in a server crash, the lease keeps the (durable) expiry of the
    // batched claim, and fencing on lease_owner, not the expiry, protects the item.
    auto r = exec_autocommit(conn, fmt::format("lease.adopt.{}", table_name(table)),
                             fmt::format("UPDATE {} SET lease_expires_at = now() + make_interval(secs => $3) FROM {} "
                                         "WHERE id = $1 AND (lease_owner = $2) IS TRUE AND status IN ('queued', 'started') "
                                         "RETURNING attempts",
                                         table_name(table), k_async_commit),
                             item_id, owner, static_cast<double>(ttl.count()));
    if (r.empty()) {
        return std::nullopt;
    }
    return Lease(table, item_id, owner, ttl, r[0][0].as<int>());
}

Lease Lease::granted(LeaseTable table, std::string item_id, std::string owner, std::chrono::seconds ttl, int attempts,
                     Clock::time_point granted_at)
{
    Lease lease(table, std::move(item_id), std::move(owner), ttl, attempts);
    lease.m_renewed = std::min(granted_at, lease.m_renewed);
    return lease;
}

bool Lease::renew(pqxx::connection& conn)
{
    if (m_siblings_crawl && m_table == LeaseTable::snapshot) {
        // The lease is held if its own row is among those renewed.
        auto rows = ride_out_transaction(conn, [&](pqxx::work& tx) {
            return tx.exec_params("UPDATE snapshot SET lease_expires_at = now() + make_interval(secs => $2) "
                                  "WHERE crawl_id = $3 AND lease_owner = $1 AND status <> 'sealed' RETURNING id",
                                  m_owner, static_cast<double>(m_ttl.count()), *m_siblings_crawl);
        });
        m_renewed = Clock::now();
        m_lost = std::none_of(rows.begin(), rows.end(),
                              [this](const pqxx::row& row) { return row[0].as<std::string>() == m_item_id; });
        return !m_lost;
    }
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(fmt::format("UPDATE {} SET lease_expires_at = now() + make_interval(secs => $3) "
                                          "WHERE id = $1 AND (lease_owner = $2) IS TRUE RETURNING 1",
                                          table_name(m_table)),
                              m_item_id, m_owner, static_cast<double>(m_ttl.count()));
    });
    m_renewed = Clock::now();
    m_lost = r.empty();
    return !m_lost;
}

bool Lease::renewal_due(Clock::time_point now) const
{
    // A renewal that found the lease gone (one made for us during a teardown)
    // is due again at once, so the owner's own check sees the loss.
    return m_lost || now >= next_renewal();
}

Lease::Clock::time_point Lease::next_renewal() const
{
    return m_renewed + m_ttl / 3;
}

bool Lease::release(pqxx::connection& conn, std::chrono::seconds retry_after)
{
    auto r = ride_out_transaction(conn, [&](pqxx::work& tx) {
        return tx.exec_params(fmt::format("UPDATE {} SET lease_owner = NULL, lease_expires_at = NULL, "
                                          " retry_at = now() + make_interval(secs => $3), modified_at = now() "
                                          "WHERE id = $1 AND (lease_owner = $2) IS TRUE RETURNING 1",
                                          table_name(m_table)),
                              m_item_id, m_owner, static_cast<double>(retry_after.count()));
    });
    return !r.empty();
}

std::chrono::seconds failure_backoff(int failures)
{
    return std::chrono::seconds(std::min(300, 2 << std::clamp(failures - 1, 0, 8)));
}

std::chrono::seconds lease_ttl_from_env()
{
    return std::chrono::seconds(read_int_setting(setting::lease_ttl));
}

} // namespace orch
