#include "orchestrator/ops_commands.hpp"

#include "common/base/errors.hpp"
#include "common/db/event_journal.hpp"
#include "common/work/work_states.hpp"

#include <fmt/format.h>

#include <iostream>

// `pause` and `resume`: a crawl set aside without losing anything, and taken up
// again. Its crawl worker (if one holds it) hears of either through the
// `crawl_cancel` NOTIFY of migration 0013, and its 1 s poll.
namespace orch {
namespace {

constexpr const char* k_lock =
    "SELECT status, coalesce(outcome, ''), lease_owner IS NOT NULL AND lease_expires_at > now(), "
    "       coalesce(lease_owner::text, '') "
    "FROM crawl WHERE id = $1 FOR UPDATE";
// The transitions themselves are work_states::pause and work_states::resume.

struct LockedCrawl {
    std::string status;
    std::string outcome;
    bool leased = false;
    std::string holder;
};

LockedCrawl lock_crawl(pqxx::work& tx, const std::string& id)
{
    auto r = tx.exec_prepared("pause_lock", id);
    if (r.empty()) {
        throw NotFound(fmt::format("crawl {} not found", id));
    }
    return LockedCrawl{r[0][0].as<std::string>(), r[0][1].as<std::string>(), r[0][2].as<bool>(),
                       r[0][3].as<std::string>()};
}

void prepare(pqxx::connection& conn)
{
    conn.prepare("pause_lock", k_lock);
}

} // namespace

void pause_crawl(pqxx::connection& conn, const std::string& id, const std::string& reason)
{
    prepare(conn);
    pqxx::work tx(conn);
    auto crawl = lock_crawl(tx, id);
    if (crawl.status == "sealed") {
        std::cout << fmt::format("crawl {} is already sealed ({}); nothing to pause\n", id, crawl.outcome);
        return;
    }
    if (crawl.status == "paused") {
        std::cout << fmt::format("crawl {} is already paused\n", id);
        return;
    }
    work_states::pause(tx, id);
    Event e{"crawl.paused", reason.empty() ? "paused by operator" : "paused by operator: " + reason, id};
    e.detail = {{"reason", reason.empty() ? "operator" : reason}};
    if (crawl.leased) {
        e.detail["held_by"] = crawl.holder;
    }
    record_event(tx, "cli", e);
    tx.commit();
    if (crawl.leased) {
        std::cout << fmt::format("crawl {} paused; its crawl worker (process {}) lets the running snapshots finish, "
                                 "then releases it\n",
                                 id, crawl.holder);
    } else {
        std::cout << fmt::format("crawl {} paused\n", id);
    }
}

void resume_crawl(pqxx::connection& conn, const std::string& id)
{
    prepare(conn);
    pqxx::work tx(conn);
    auto crawl = lock_crawl(tx, id);
    if (crawl.status != "paused") {
        std::cout << fmt::format("crawl {} is not paused ({}{}); nothing to resume\n", id, crawl.status,
                                 crawl.outcome.empty() ? "" : ", " + crawl.outcome);
        return;
    }
    work_states::resume(tx, id);
    Event e{"crawl.resumed", "resumed by operator", id};
    if (crawl.leased) {
        e.detail["held_by"] = crawl.holder;
    }
    record_event(tx, "cli", e);
    tx.commit();
    std::cout << fmt::format("crawl {} resumed{}\n", id,
                             crawl.leased ? fmt::format(" (its crawl worker, process {}, carries on)", crawl.holder)
                                          : "; a running orchestrator takes it up");
}

} // namespace orch
