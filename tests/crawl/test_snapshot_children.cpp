// SnapshotStore::add_children (snapshot_worker/snapshot_store.hpp) against a real
// PostgreSQL: two workers of one crawl adding the same discovered URLs at once.

#include "common/base/random_id.hpp"
#include "snapshot_worker/snapshot_store.hpp"
#include "tests/support/pg_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace orch;
using namespace orch::test;

namespace {

// One worker's side: its own connection and a parent snapshot leased to it.
struct Discoverer {
    std::unique_ptr<pqxx::connection> conn;
    std::string owner = random_uuid();
    std::unique_ptr<SnapshotStore> store;
    int added = 0;
    std::string error;
};

} // namespace

TEST_CASE("snapshot store: two workers adding the same URLs in opposite orders at once do not deadlock",
          "[snapshot_children]")
{
    ScratchDatabase db;
    auto admin = db.connect();
    std::string crawl_id;
    {
        pqxx::work tx(*admin);
        // No max_urls: nothing serialises the two inserts but their row locks.
        crawl_id = tx.exec1("INSERT INTO crawl (urls, max_depth, status, started_at) "
                            "VALUES ('{http://a.test/}', 5, 'started', now()) RETURNING id")[0]
                       .as<std::string>();
        tx.commit();
    }
    Discoverer sides[2];
    for (int i = 0; i < 2; ++i) {
        auto& d = sides[i];
        d.conn = db.connect();
        pqxx::work tx(*admin);
        auto parent = tx.exec_params1("INSERT INTO snapshot (crawl_id, url, status, lease_owner, lease_expires_at) "
                                      "VALUES ($1, $2, 'started', $3, now() + interval '1 hour') RETURNING id",
                                      crawl_id, "http://a.test/parent/" + std::to_string(i), d.owner)[0]
                          .as<std::string>();
        tx.commit();
        d.store = std::make_unique<SnapshotStore>(*d.conn, parent, crawl_id);
        d.store->set_owner(d.owner);
    }

    // Each round a fresh set, large enough that the two inserts overlap: in the
    // pages' orders (one ascending, one descending) they meet in the middle, each
    // waiting on a row the other has not committed.
    constexpr int k_rounds = 3;
    constexpr int k_urls = 4000;
    for (int round = 0; round < k_rounds; ++round) {
        std::vector<std::string> urls;
        for (int n = 0; n < k_urls; ++n) {
            urls.push_back("http://b.test/" + std::to_string(round) + "/" + std::to_string(n));
        }
        std::sort(urls.begin(), urls.end());
        auto reversed = urls;
        std::reverse(reversed.begin(), reversed.end());

        for (auto& d : sides) {
            d.added = 0;
            d.error.clear();
        }
        std::atomic<int> ready{0};
        auto add = [&](Discoverer& d, const std::vector<std::string>& page) {
            ready.fetch_add(1);
            while (ready.load() < 2) {
                std::this_thread::yield();
            }
            try {
                d.added = d.store->add_children(FilteredUrls{page, {}}, 1, std::nullopt);
            } catch (const std::exception& e) {
                d.error = e.what();
            }
        };
        std::thread first(add, std::ref(sides[0]), std::cref(urls));
        std::thread second(add, std::ref(sides[1]), std::cref(reversed));
        first.join();
        second.join();

        INFO("round " << round);
        CHECK(sides[0].error == "");
        CHECK(sides[1].error == "");
        CHECK(sides[0].added + sides[1].added == k_urls);
        pqxx::nontransaction tx(*admin);
        CHECK(tx.exec_params1("SELECT count(*) FROM snapshot WHERE crawl_id = $1 AND url LIKE $2 AND depth = 1",
                              crawl_id, "http://b.test/" + std::to_string(round) + "/%")[0]
                  .as<int>() == k_urls);
    }
}
