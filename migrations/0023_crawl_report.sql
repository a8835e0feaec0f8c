-- A crawl's snapshots and its report, as views for dashboards (the reader role
-- reads ops.*) and for `orchestrator snapshots` and `orchestrator report`. The
-- report is one view per section: a section added later is one view more and
-- one entry in orchestrator/command_report.cpp, nothing else changes.
--
-- Every view has crawl_id as a plain column or a grouping column, and a filter
-- on it reaches the snapshot table's crawl index (leakproof uuid equality, past
-- security_barrier): a dashboard reads one crawl at the cost of that crawl.

-- A capture hook's HTTP status of the page's main document, from its result's
-- output_json: "status" (what the visit plugin reports), else "status_code" or
-- "http_status", as a number or a numeric string of three digits. NULL when
-- absent or not a status code: hooks that report none are simply not counted.
CREATE FUNCTION ops.result_status_code(output_json jsonb) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (coalesce(output_json -> 'status', output_json -> 'status_code', output_json -> 'http_status')
                      #>> '{}') ~ '^[1-5][0-9][0-9]$'
                THEN (coalesce(output_json -> 'status', output_json -> 'status_code', output_json -> 'http_status')
                      #>> '{}')::integer END;

-- The page's MIME type from output_json ("mime_type", "mimetype" or
-- "content_type"), lower-case, without parameters ("text/html; charset=utf-8"
-- is "text/html"). NULL when absent.
CREATE FUNCTION ops.result_mime_type(output_json jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN nullif(lower(btrim(split_part(
        coalesce(output_json ->> 'mime_type', output_json ->> 'mimetype', output_json ->> 'content_type'), ';', 1))),
        '');

-- What a failure is grouped by: the first line of its error, trimmed, at most
-- 200 characters ('(no error message)' for none).
CREATE FUNCTION ops.failure_reason(error text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN coalesce(nullif(left(btrim(split_part(error, E'\n', 1)), 200), ''), '(no error message)');

-- Every snapshot with what a listing shows: its host (url_host, as in
-- ops.crawl_hosts), its state (the outcome once sealed, else the status) and its
-- directory relative to the data directory.
CREATE VIEW ops.crawl_snapshots WITH (security_barrier) AS
SELECT s.crawl_id, s.id, s.url, url_host(s.url) AS host, s.depth, s.status, s.outcome,
       coalesce(s.outcome, s.status) AS state, s.title, s.error, s.attempts, s.parent_snapshot_id,
       s.created_at, s.started_at, s.sealed_at, 'snapshots/' || s.id AS dir
FROM snapshot s;

-- Per host of each crawl: its snapshots, how many succeeded, how many were
-- sealed otherwise (failures: partial, failed, cancelled, timed_out), how many
-- are not sealed yet.
CREATE VIEW ops.crawl_report_hosts WITH (security_barrier) AS
SELECT s.crawl_id, url_host(s.url) AS host, count(*) AS snapshots,
       count(*) FILTER (WHERE s.outcome = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE s.status = 'sealed' AND s.outcome <> 'succeeded') AS failures,
       count(*) FILTER (WHERE s.status <> 'sealed') AS unsealed
FROM snapshot s
GROUP BY s.crawl_id, url_host(s.url);

-- Per HTTP status code of each crawl: how many pages answered with it. One code
-- per snapshot: the visit plugin's when it reported one, else the first hook's
-- (by hook name) that did.
CREATE VIEW ops.crawl_report_status_codes WITH (security_barrier) AS
SELECT p.crawl_id, p.status_code, count(*) AS pages
FROM (SELECT DISTINCT ON (s.crawl_id, s.id) s.crawl_id, s.id, ops.result_status_code(a.output_json) AS status_code
      FROM snapshot s JOIN archive_result a ON a.snapshot_id = s.id
      WHERE ops.result_status_code(a.output_json) IS NOT NULL
      ORDER BY s.crawl_id, s.id, (a.plugin = 'visit') DESC, a.hook_name) p
GROUP BY p.crawl_id, p.status_code;

-- Per MIME type of each crawl, where a hook reported one: how many pages. One
-- type per snapshot, chosen as the status code is.
CREATE VIEW ops.crawl_report_mime_types WITH (security_barrier) AS
SELECT p.crawl_id, p.mime_type, count(*) AS pages
FROM (SELECT DISTINCT ON (s.crawl_id, s.id) s.crawl_id, s.id, ops.result_mime_type(a.output_json) AS mime_type
      FROM snapshot s JOIN archive_result a ON a.snapshot_id = s.id
      WHERE ops.result_mime_type(a.output_json) IS NOT NULL
      ORDER BY s.crawl_id, s.id, (a.plugin = 'visit') DESC, a.hook_name) p
GROUP BY p.crawl_id, p.mime_type;

-- Failures of each crawl by plugin and reason (ops.failure_reason): failed
-- results, and the snapshots sealed unsuccessful with an error but no failed
-- result (a worker that died, a crawl stopped), whose plugin is NULL. results:
-- failed results (or such snapshots); snapshots: distinct snapshots; one
-- example URL (the least) and the latest time it happened.
CREATE VIEW ops.crawl_report_failures WITH (security_barrier) AS
SELECT s.crawl_id, a.plugin, ops.failure_reason(a.error) AS reason, count(*) AS results,
       count(DISTINCT s.id) AS snapshots, min(s.url) AS example_url, max(a.end_ts) AS last_at
FROM snapshot s JOIN archive_result a ON a.snapshot_id = s.id
WHERE a.status = 'failed'
GROUP BY s.crawl_id, a.plugin, ops.failure_reason(a.error)
UNION ALL
SELECT s.crawl_id, NULL, ops.failure_reason(s.error), count(*), count(*), min(s.url), max(s.sealed_at)
FROM snapshot s
WHERE s.status = 'sealed' AND s.outcome <> 'succeeded' AND s.error IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM archive_result a WHERE a.snapshot_id = s.id AND a.status = 'failed')
GROUP BY s.crawl_id, ops.failure_reason(s.error);

COMMENT ON VIEW ops.crawl_snapshots IS
    'every snapshot: url, host, depth, status, outcome, state, title, error, directory under the data dir';
COMMENT ON VIEW ops.crawl_report_hosts IS 'per host of each crawl: snapshots, succeeded, failures, unsealed';
COMMENT ON VIEW ops.crawl_report_status_codes IS 'per HTTP status code of each crawl: pages (from capture hooks)';
COMMENT ON VIEW ops.crawl_report_mime_types IS 'per MIME type of each crawl: pages (from capture hooks)';
COMMENT ON VIEW ops.crawl_report_failures IS
    'failures of each crawl by plugin (NULL: the snapshot itself) and reason: results, snapshots, an example URL';
