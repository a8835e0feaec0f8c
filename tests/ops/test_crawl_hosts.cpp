#include "tests/ops/ops_fixture.hpp"

#include <catch2/catch.hpp>

using namespace orch::test;
using namespace orch::test::ops_ids;

TEST_CASE("ops: crawl_hosts counts each unsealed crawl's snapshots per host - running and waiting - with its last "
          "claim and rules",
          "[ops]")
{
    OpsTree tree;
    // The tree: c1 runs s3 on a.test (s1, s2 sealed); c2 waits with s4 on b.test.
    // Add to c1: a.test waiting twice (queued, and started with no lease: a retry),
    // B.test:8080 running (the same host as b.test: case and port do not count).
    tree.exec("INSERT INTO snapshot (crawl_id, url, status, lease_owner, lease_expires_at) VALUES"
              " ('" + c1 + "', 'http://a.test/4', 'queued', NULL, NULL),"
              " ('" + c1 + "', 'http://a.test/5', 'started', NULL, NULL),"
              " ('" + c1 + "', 'http://B.test:8080/x', 'started', '" + sw1 + "', now() + interval '1 hour')");
    tree.exec("UPDATE crawl SET max_per_host = 2, host_delay_s = 0.5 WHERE id = '" + c1 + "'");
    // A fixed claim time, read back as seconds past a fixed origin: an age taken
    // from now() would drift between the statements on a busy machine.
    tree.exec("INSERT INTO crawl_host_claim (crawl_id, host, last_claimed_at) VALUES ('" + c1 +
              "', 'a.test', '2000-01-01 00:00:03+00')");
    auto rows = [&] {
        return tree.scalar("SELECT string_agg(format('%s %s r%s w%s %s %s %s', CASE crawl_id WHEN '" + c1 +
                           "' THEN 'c1' ELSE 'c2' END, host, running, waiting, coalesce(max_per_host::text, '-'),"
                           " coalesce(host_delay_s::text, '-'), CASE WHEN last_claimed_at IS NULL THEN 'never'"
                           " ELSE extract(epoch FROM last_claimed_at - '2000-01-01 00:00:00+00')::int::text END),"
                           " '; ' ORDER BY crawl_id, host) FROM ops.crawl_hosts");
    };
    CHECK(rows() == "c1 a.test r1 w2 2 0.5 3; c1 b.test r1 w0 2 0.5 never; c2 b.test r0 w1 - - never");

    // A host whose snapshots are all sealed is gone; a sealed crawl has no rows.
    tree.exec("UPDATE snapshot SET status = 'sealed', outcome = 'succeeded', sealed_at = now(), lease_owner = NULL,"
              " lease_expires_at = NULL WHERE url = 'http://B.test:8080/x'");
    CHECK(rows() == "c1 a.test r1 w2 2 0.5 3; c2 b.test r0 w1 - - never");
    tree.exec("UPDATE snapshot SET status = 'sealed', outcome = 'cancelled', sealed_at = now(), lease_owner = NULL,"
              " lease_expires_at = NULL WHERE crawl_id = '" + c1 + "'");
    tree.exec("UPDATE crawl SET status = 'sealed', outcome = 'cancelled', sealed_at = now(), lease_owner = NULL,"
              " lease_expires_at = NULL WHERE id = '" + c1 + "'");
    CHECK(rows() == "c2 b.test r0 w1 - - never");
}
