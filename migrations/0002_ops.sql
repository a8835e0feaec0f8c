-- The `ops` schema: read-only views for operators and dashboards. A public API:
-- columns are only ever added, never renamed or removed (add a new view instead).
--
-- The views are owned by the migrating user and are ordinary (not security_invoker)
-- views, so they read the tables with the owner's rights: a role granted only
-- USAGE on `ops` and SELECT on these views (`orchestrator ops create-reader-role`)
-- reads them without any privilege on the tables. security_barrier keeps a
-- reader's WHERE clauses from being evaluated before the view's own conditions.
--
-- `type` everywhere is the low-cardinality label of a process row:
-- orchestrator | crawl_worker | snapshot_worker | worker | hook | cli | server.

CREATE SCHEMA ops;
COMMENT ON SCHEMA ops IS 'Read-only views over the orchestrator tables for operators and dashboards (public API)';

CREATE FUNCTION ops.process_label(process_type text, worker_type text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN process_type = 'worker' AND worker_type IS NOT NULL THEN worker_type || '_worker'
                ELSE process_type END;

-- How a process ended, from its exit record:
-- ok | failed | killed | timed_out | lost | spawn_failed | unknown (NULL while not exited).
CREATE FUNCTION ops.process_outcome(status text, exit_code integer, term_signal integer, end_reason text)
    RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE
        WHEN status <> 'exited' THEN NULL
        WHEN end_reason = 'timed_out' THEN 'timed_out'
        WHEN end_reason = 'spawn_failed' THEN 'spawn_failed'
        WHEN end_reason IN ('lost', 'pid_reused', 'boot_changed') THEN 'lost'
        WHEN end_reason IN ('killed_on_teardown', 'killed_on_recovery') THEN 'killed'
        WHEN term_signal IS NOT NULL THEN 'killed'
        WHEN exit_code = 0 THEN 'ok'
        WHEN exit_code IS NOT NULL THEN 'failed'
        ELSE 'unknown' END;

CREATE FUNCTION ops.signal_name(term_signal integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE term_signal
        WHEN 1 THEN 'SIGHUP' WHEN 2 THEN 'SIGINT' WHEN 3 THEN 'SIGQUIT' WHEN 4 THEN 'SIGILL'
        WHEN 6 THEN 'SIGABRT' WHEN 7 THEN 'SIGBUS' WHEN 8 THEN 'SIGFPE' WHEN 9 THEN 'SIGKILL'
        WHEN 11 THEN 'SIGSEGV' WHEN 13 THEN 'SIGPIPE' WHEN 14 THEN 'SIGALRM' WHEN 15 THEN 'SIGTERM'
        WHEN 24 THEN 'SIGXCPU' WHEN 25 THEN 'SIGXFSZ'
        ELSE CASE WHEN term_signal IS NULL THEN NULL ELSE 'SIG' || term_signal END END;

-- A row's part of a tree's sort key: ORDER BY sort_key lists each parent before its
-- children and siblings in creation order.
CREATE FUNCTION ops.tree_key(created_at timestamptz, id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_char(created_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || '.' || id::text;

-- Every process row in its tree, walked from the roots (rows without a parent).
-- path = ids from the root down to the row; depth 0 = root; ORDER BY sort_key for display. Reads the whole table:
-- for live work use ops.process_tree_live.
CREATE VIEW ops.process_tree WITH (security_barrier) AS
WITH RECURSIVE tree (id, root_id, depth, path, sort_key) AS (
    SELECT p.id, p.id, 0, ARRAY[p.id], ops.tree_key(p.created_at, p.id)
    FROM process p
    WHERE p.parent_id IS NULL
    UNION ALL
    SELECT c.id, t.root_id, t.depth + 1, t.path || c.id, t.sort_key || '/' || ops.tree_key(c.created_at, c.id)
    FROM tree t
    JOIN process c ON c.parent_id = t.id
    WHERE t.depth < 32 AND c.id <> ALL (t.path)
)
SELECT p.id, p.parent_id, t.root_id, t.depth, t.path, t.sort_key,
       ops.process_label(p.process_type, p.worker_type) AS type,
       p.process_type, p.worker_type, p.status, p.machine_id, p.pid,
       p.crawl_id, p.snapshot_id, p.plugin, p.hook_name,
       p.started_at, p.ended_at,
       coalesce(p.ended_at, now()) - p.started_at AS runtime,
       p.heartbeat_at,
       p.exit_code, p.term_signal,
       ops.signal_name(p.term_signal) AS signal_name,
       p.end_reason,
       ops.process_outcome(p.status, p.exit_code, p.term_signal, p.end_reason) AS outcome,
       p.created_at
FROM tree t
JOIN process p ON p.id = t.id;

-- The same columns for rows that are not exited, walked from live rows whose parent
-- is missing or exited (an orphan is a root here). Cheap: uses process_live_idx.
CREATE VIEW ops.process_tree_live WITH (security_barrier) AS
WITH RECURSIVE live AS (
    SELECT * FROM process WHERE status <> 'exited'
), tree (id, root_id, depth, path, sort_key) AS (
    SELECT l.id, l.id, 0, ARRAY[l.id], ops.tree_key(l.created_at, l.id)
    FROM live l
    WHERE l.parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM live x WHERE x.id = l.parent_id)
    UNION ALL
    SELECT c.id, t.root_id, t.depth + 1, t.path || c.id, t.sort_key || '/' || ops.tree_key(c.created_at, c.id)
    FROM tree t
    JOIN live c ON c.parent_id = t.id
    WHERE t.depth < 32 AND c.id <> ALL (t.path)
)
SELECT p.id, p.parent_id, t.root_id, t.depth, t.path, t.sort_key,
       ops.process_label(p.process_type, p.worker_type) AS type,
       p.process_type, p.worker_type, p.status, p.machine_id, p.pid,
       p.crawl_id, p.snapshot_id, p.plugin, p.hook_name,
       p.started_at, p.ended_at,
       coalesce(p.ended_at, now()) - p.started_at AS runtime,
       p.heartbeat_at,
       p.exit_code, p.term_signal,
       ops.signal_name(p.term_signal) AS signal_name,
       p.end_reason,
       ops.process_outcome(p.status, p.exit_code, p.term_signal, p.end_reason) AS outcome,
       p.created_at
FROM tree t
JOIN live p ON p.id = t.id;

-- Running processes with their runtime and the age of their last heartbeat.
CREATE VIEW ops.process_running WITH (security_barrier) AS
SELECT p.id, p.parent_id, p.machine_id,
       ops.process_label(p.process_type, p.worker_type) AS type,
       p.process_type, p.worker_type, p.pid, p.crawl_id, p.snapshot_id, p.plugin, p.hook_name,
       p.started_at,
       now() - p.started_at AS runtime,
       extract(epoch FROM now() - p.started_at)::double precision AS runtime_s,
       p.heartbeat_at,
       now() - p.heartbeat_at AS heartbeat_age,
       extract(epoch FROM now() - p.heartbeat_at)::double precision AS heartbeat_age_s,
       p.timeout_s
FROM process p
WHERE p.status = 'running';

-- One row per exited process: when, what, how it ended, and the last of its stderr.
CREATE VIEW ops.process_exits WITH (security_barrier) AS
SELECT p.id, p.parent_id, p.machine_id, p.ended_at,
       ops.process_label(p.process_type, p.worker_type) AS type,
       p.process_type, p.worker_type, p.plugin, p.hook_name, p.crawl_id, p.snapshot_id, p.pid,
       p.started_at,
       extract(epoch FROM p.ended_at - p.started_at)::double precision AS duration_s,
       ops.process_outcome(p.status, p.exit_code, p.term_signal, p.end_reason) AS outcome,
       p.exit_code,
       p.term_signal AS signal,
       ops.signal_name(p.term_signal) AS signal_name,
       p.end_reason,
       p.stderr_tail
FROM process p
WHERE p.status = 'exited';

-- Rows per status, for stat panels: entity = crawl | snapshot | archive_result | process.
CREATE VIEW ops.state_counts WITH (security_barrier) AS
SELECT 'crawl'::text AS entity, status, count(*) AS count FROM crawl GROUP BY status
UNION ALL
SELECT 'snapshot', status, count(*) FROM snapshot GROUP BY status
UNION ALL
SELECT 'archive_result', status, count(*) FROM archive_result GROUP BY status
UNION ALL
SELECT 'process', status, count(*) FROM process GROUP BY status;

-- Per crawl: snapshots by status and outcome, the sealing rate over the last 10
-- minutes (per minute) and an ETA for the unsealed rest at that rate.
CREATE VIEW ops.crawl_progress WITH (security_barrier) AS
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
           count(*) FILTER (WHERE s.sealed_at > now() - interval '10 minutes') AS sealed_last_10m
    FROM snapshot s
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
       coalesce(k.sealed_last_10m, 0) / 10.0 AS rate_per_min,
       CASE WHEN c.status = 'sealed' THEN interval '0'
            WHEN coalesce(k.sealed_last_10m, 0) = 0 THEN NULL
            ELSE (k.snapshots - k.sealed) * interval '1 minute' / (k.sealed_last_10m / 10.0) END AS eta,
       CASE WHEN c.status = 'sealed' THEN c.sealed_at
            WHEN coalesce(k.sealed_last_10m, 0) = 0 THEN NULL
            ELSE now() + (k.snapshots - k.sealed) * interval '1 minute' / (k.sealed_last_10m / 10.0) END AS eta_at
FROM crawl c
LEFT JOIN counts k ON k.crawl_id = c.id;

-- Per plugin and hook: finished runs, failures, and p50/p95 durations (seconds).
CREATE VIEW ops.hook_stats WITH (security_barrier) AS
SELECT ar.plugin, ar.hook_name,
       count(*) FILTER (WHERE ar.status IN ('succeeded', 'failed', 'skipped', 'noresults')) AS runs,
       count(*) FILTER (WHERE ar.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE ar.status = 'failed') AS failures,
       count(*) FILTER (WHERE ar.status = 'skipped') AS skipped,
       count(*) FILTER (WHERE ar.status = 'noresults') AS noresults,
       count(*) FILTER (WHERE ar.status IN ('queued', 'started')) AS pending,
       (count(*) FILTER (WHERE ar.status = 'failed'))::double precision
           / nullif(count(*) FILTER (WHERE ar.status IN ('succeeded', 'failed', 'skipped', 'noresults')), 0)
           AS failure_rate,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ar.end_ts - ar.start_ts))
           FILTER (WHERE ar.start_ts IS NOT NULL AND ar.end_ts IS NOT NULL) AS p50_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM ar.end_ts - ar.start_ts))
           FILTER (WHERE ar.start_ts IS NOT NULL AND ar.end_ts IS NOT NULL) AS p95_s,
       max(ar.end_ts) AS last_run_at
FROM archive_result ar
GROUP BY ar.plugin, ar.hook_name;
