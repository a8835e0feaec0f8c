-- Claim throughput (bench row 3): the due-snapshot queries order by
-- (depth, retry_at, created_at) within one crawl; 0001's snapshot_due_idx lacked
-- depth, so every claim sorted all of the crawl's due rows (linear in the queue).
-- This index serves the ORDER BY ... LIMIT directly, flat as the queue grows.
CREATE INDEX snapshot_claim_idx ON snapshot (crawl_id, depth, retry_at, created_at)
    WHERE status IN ('queued', 'started');
DROP INDEX snapshot_due_idx;

-- Hot queue tables: every claim, renewal and seal rewrites a row. Vacuum them after
-- a fixed number of dead rows rather than a fraction of the table, so a large queue
-- does not accumulate dead index entries that claims must step over, and keep room
-- on each page for HOT updates of lease renewals and heartbeats (unindexed columns).
ALTER TABLE snapshot SET (fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1);
ALTER TABLE crawl SET (fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 500,
    autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE process SET (fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 2000,
    autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 1);
