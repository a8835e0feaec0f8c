-- Per host of each crawl not yet sealed: its snapshots running (started, leased)
-- and waiting (queued, or started with no lease: a retry), the crawl's last claim
-- of the host (crawl_host_claim, kept only for crawls with per-host rules) and the
-- crawl's own rules. For dashboards (the reader role reads ops.*) and for
-- `orchestrator show crawl`, which used to carry this query itself.
-- Only unsealed snapshots are read (snapshot_claim_idx's rows), so the cost is
-- that of the work left, not of the history; a filter on crawl_id reaches the
-- grouped subquery (leakproof uuid equality on a grouping column).
CREATE VIEW ops.crawl_hosts WITH (security_barrier) AS
SELECT h.crawl_id, h.host, h.running, h.waiting, hc.last_claimed_at, c.max_per_host, c.host_delay_s,
       c.status AS crawl_status
FROM (SELECT s.crawl_id, url_host(s.url) AS host,
             count(*) FILTER (WHERE s.status = 'started' AND s.lease_owner IS NOT NULL) AS running,
             count(*) FILTER (WHERE s.status = 'queued' OR s.lease_owner IS NULL) AS waiting
      FROM snapshot s WHERE s.status IN ('queued', 'started') GROUP BY s.crawl_id, url_host(s.url)) h
JOIN crawl c ON c.id = h.crawl_id
LEFT JOIN crawl_host_claim hc ON hc.crawl_id = h.crawl_id AND hc.host = h.host;

COMMENT ON VIEW ops.crawl_hosts IS
    'per host of each unsealed crawl: snapshots running and waiting, last claim (crawls with per-host rules), the rules';
