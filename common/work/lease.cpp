#include "common/work/lease.hpp"

#include "common/config/settings.hpp"

#include <algorithm>

namespace orch {

Lease::Lease(LeaseTable table, std::string item_id, std::string owner, std::chrono::seconds ttl, int attempts)
    : m_table(table), m_item_id(std::move(item_id)), m_owner(std::move(owner)), m_ttl(ttl), m_attempts(attempts)
{
}

std::optional<Lease> Lease::held(LeaseTable table, const std::string& item_id, const std::string& owner,
                                 std::chrono::seconds ttl, std::optional<int> attempts)
{
    if (!attempts) {
        return std::nullopt;
    }
    return Lease(table, item_id, owner, ttl, *attempts);
}

std::optional<Lease> Lease::claim(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                  const std::string& owner, std::chrono::seconds ttl)
{
    return held(table, item_id, owner, ttl, work_states::claim(conn, table, item_id, owner, ttl));
}

std::optional<Lease> Lease::adopt(pqxx::connection& conn, LeaseTable table, const std::string& item_id,
                                  const std::string& owner, std::chrono::seconds ttl)
{
    return held(table, item_id, owner, ttl, work_states::adopt(conn, table, item_id, owner, ttl));
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
        const auto renewed = work_states::renew_snapshots_of(conn, *m_siblings_crawl, m_owner, m_ttl);
        m_renewed = Clock::now();
        m_lost = std::find(renewed.begin(), renewed.end(), m_item_id) == renewed.end();
        return !m_lost;
    }
    m_lost = !work_states::renew(conn, m_table, m_item_id, m_owner, m_ttl);
    m_renewed = Clock::now();
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
    return work_states::release(conn, m_table, m_item_id, m_owner, retry_after);
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
