-- ops.crawl_progress: a rate and an ETA that hold for young, sealed and paused
-- crawls.
--
-- 0002 divided the snapshots sealed in the last 10 minutes by 10 minutes, for
-- every crawl. A crawl running for 2 minutes at 200 snapshots a minute showed
-- 40/min and an ETA five times too long; a crawl sealed a minute ago after 5
-- seconds showed a rate it never had. The window is now the part of the last 10
-- minutes the crawl ran: from the later of its start and 10 minutes ago, to its
-- seal (or now). Only snapshots sealed in that window count, so a crawl retried
-- after its seal is not credited with its earlier run.
--
-- Added columns (appended: the view is a public interface):
--   running_s         seconds the crawl ran, its pauses not counted (NULL before it starts);
--   avg_rate_per_min  snapshots sealed per minute of running_s.
-- A paused crawl has no ETA: nothing progresses until it is resumed.
CREATE OR REPLACE VIEW ops.crawl_progress WITH (security_barrier) AS
-- `counts` is read once, so that a filter on the crawl reaches the snapshot scan
-- (`show crawl` reads one crawl, not every snapshot ever sealed).
WITH counts AS (
    SELECT s.crawl_id,
           count(*) AS snapshots,
           count(*) FILTER (WHERE s.status = 'queued') AS queued,
           count(*) FILTER (WHERE s.status = 'started') AS started,
           count(*) FILTER (WHERE s.status = 'sealed') AS sealed,
           count(*) FILTER (WHERE s.outcome = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE s.outcome = 'partial') AS partial,
           count(*) FILTER (WHERE s.outcome = 'failed') AS failed,
           count(*) FILTER (WHERE s.outcome = 'cancelled') AS cancelled,
           count(*) FILTER (WHERE s.outcome = 'timed_out') AS timed_out,
           count(*) FILTER (WHERE s.sealed_at > greatest(sc.started_at, now() - interval '10 minutes'))
               AS sealed_in_window
    FROM snapshot s
    JOIN crawl sc ON sc.id = s.crawl_id
    GROUP BY s.crawl_id
)
SELECT c.id AS crawl_id, c.label, c.status, c.outcome, c.seal_reason,
       c.created_at, c.started_at, c.sealed_at, c.cancel_requested_at, c.lease_owner,
       coalesce(k.snapshots, 0) AS snapshots,
       coalesce(k.queued, 0) AS queued,
       coalesce(k.started, 0) AS started,
       coalesce(k.sealed, 0) AS sealed,
       coalesce(k.succeeded, 0) AS succeeded,
       coalesce(k.partial, 0) AS partial,
       coalesce(k.failed, 0) AS failed,
       coalesce(k.cancelled, 0) AS cancelled,
       coalesce(k.timed_out, 0) AS timed_out,
       r.rate_per_min,
       CASE WHEN c.status = 'sealed' THEN interval '0'
            WHEN c.status = 'paused' OR r.rate_per_min = 0 THEN NULL
            ELSE (k.snapshots - k.sealed) * interval '1 minute' / r.rate_per_min END AS eta,
       CASE WHEN c.status = 'sealed' THEN c.sealed_at
            WHEN c.status = 'paused' OR r.rate_per_min = 0 THEN NULL
            ELSE now() + (k.snapshots - k.sealed) * interval '1 minute' / r.rate_per_min END AS eta_at,
       w.running_s,
       CASE WHEN w.running_s > 0 THEN coalesce(k.sealed, 0) * 60.0 / w.running_s::numeric END AS avg_rate_per_min
FROM crawl c
LEFT JOIN counts k ON k.crawl_id = c.id
CROSS JOIN LATERAL (
    SELECT -- The last 10 minutes of its run, in seconds (never zero, to divide by).
           greatest(extract(epoch FROM coalesce(c.sealed_at, now())
                                       - greatest(c.started_at, now() - interval '10 minutes')), 0.001) AS window_s,
           coalesce(c.sealed_at, now()) > greatest(c.started_at, now() - interval '10 minutes') AS window_open,
           CASE WHEN c.started_at IS NOT NULL THEN
               greatest(extract(epoch FROM coalesce(c.sealed_at, now()) - c.started_at) - c.paused_s
                        - CASE WHEN c.paused_at IS NULL THEN 0
                               ELSE greatest(extract(epoch FROM coalesce(c.sealed_at, now()) - c.paused_at), 0) END,
                        0) END AS running_s
) w
CROSS JOIN LATERAL (
    SELECT CASE WHEN w.window_open THEN coalesce(k.sealed_in_window, 0) * 60.0 / w.window_s::numeric
                ELSE 0 END AS rate_per_min
) r;
