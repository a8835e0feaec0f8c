-- The process tree of a recent window, for `orchestrator ps --since` and for
-- dashboards. ops.process_tree walks every row ever recorded: on a long history
-- (1M exited rows) it takes the server about 20 s, and its answer is mostly old
-- hooks. This function returns the rows that were alive at some moment since
-- `since` (not exited, or ended at or after it) together with their ancestors,
-- whatever their age, so that every row shows in its tree under the worker and
-- the orchestrator that ran it. It reads only those rows: the live ones through
-- process_live_idx, the recently ended ones through process_ended_idx, the
-- ancestors by primary key.
--
-- Same columns as ops.process_tree (its row type), same meaning; a row whose
-- parent was pruned is a root. PL/pgSQL, so that `since` is planned as the value
-- it is (a SQL function's parameter would be estimated at a third of the table,
-- a sequential scan). SECURITY DEFINER like the views' owner rights: a reader
-- role with USAGE on `ops` calls it without any privilege on the tables. No JIT:
-- the recursive walks' row estimates are wild (billions), and compiling the plan
-- took 0.78 s of the 0.96 s of a 6k-row answer on a 1M-row history.
CREATE FUNCTION ops.process_tree_since(since timestamptz) RETURNS SETOF ops.process_tree
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET jit = off AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE recent AS (
        SELECT p.id FROM process p WHERE p.status <> 'exited'
        UNION
        SELECT p.id FROM process p WHERE p.status = 'exited' AND p.ended_at >= since
    ), wanted (id) AS (
        SELECT r.id FROM recent r
        UNION
        SELECT p.parent_id FROM wanted w JOIN process p ON p.id = w.id WHERE p.parent_id IS NOT NULL
    ), picked AS MATERIALIZED (
        SELECT p.* FROM process p WHERE p.id IN (SELECT w.id FROM wanted w)
    ), tree (id, root_id, depth, path, sort_key) AS (
        SELECT l.id, l.id, 0, ARRAY[l.id], ops.tree_key(l.created_at, l.id)
        FROM picked l
        WHERE l.parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM picked x WHERE x.id = l.parent_id)
        UNION ALL
        SELECT c.id, t.root_id, t.depth + 1, t.path || c.id, t.sort_key || '/' || ops.tree_key(c.created_at, c.id)
        FROM tree t
        JOIN picked c ON c.parent_id = t.id
        WHERE t.depth < 32 AND c.id <> ALL (t.path)
    )
    SELECT p.id, p.parent_id, t.root_id, t.depth, t.path, t.sort_key,
           ops.process_label(p.process_type, p.worker_type),
           p.process_type, p.worker_type, p.status, p.machine_id, p.pid,
           p.crawl_id, p.snapshot_id, p.plugin, p.hook_name,
           p.started_at, p.ended_at,
           coalesce(p.ended_at, now()) - p.started_at,
           p.heartbeat_at,
           p.exit_code, p.term_signal,
           ops.signal_name(p.term_signal),
           p.end_reason,
           ops.process_outcome(p.status, p.exit_code, p.term_signal, p.end_reason),
           p.created_at
    FROM tree t
    JOIN picked p ON p.id = t.id;
END $$;
COMMENT ON FUNCTION ops.process_tree_since(timestamptz) IS
    'ops.process_tree restricted to rows alive at some moment since `since`, with their ancestors';
