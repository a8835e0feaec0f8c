-- The skipped-URLs section of `orchestrator report` (orchestrator/command_report.cpp):
-- per crawl and reason, the links that did not become snapshots because they
-- were out of the crawl's scope or matched url_deny (crawl_skipped_url, the
-- listed ones, plus crawl_skipped_count, those past the list's bound), with
-- one example URL (the least) and when one was last found.
CREATE VIEW ops.crawl_report_skipped WITH (security_barrier) AS
SELECT coalesce(l.crawl_id, c.crawl_id) AS crawl_id, coalesce(l.reason, c.reason) AS reason,
       coalesce(l.listed, 0) + coalesce(c.unlisted, 0) AS urls, coalesce(l.listed, 0) AS listed,
       l.example_url, l.last_found_at
FROM (SELECT crawl_id, reason, count(*) AS listed, min(url) AS example_url, max(found_at) AS last_found_at
      FROM crawl_skipped_url GROUP BY crawl_id, reason) l
FULL JOIN crawl_skipped_count c ON c.crawl_id = l.crawl_id AND c.reason = l.reason;

COMMENT ON VIEW ops.crawl_report_skipped IS
    'per crawl and reason (out_of_scope, denied): skipped links, how many are listed in crawl_skipped_url, an example';
