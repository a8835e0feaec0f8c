-- A snapshot worker writes the rows of all a snapshot's hooks before the first
-- one starts (Supervisor::reserve). A row whose hook never started (the worker
-- was stopped or lost its lease first) is closed with end_reason 'not_started';
-- its outcome says so instead of 'unknown'. Same signature and return type:
-- the views that call it stay as they are.
CREATE OR REPLACE FUNCTION ops.process_outcome(status text, exit_code integer, term_signal integer, end_reason text)
    RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE
        WHEN status <> 'exited' THEN NULL
        WHEN end_reason = 'timed_out' THEN 'timed_out'
        WHEN end_reason = 'spawn_failed' THEN 'spawn_failed'
        WHEN end_reason = 'not_started' THEN 'not_started'
        WHEN end_reason IN ('lost', 'pid_reused', 'boot_changed') THEN 'lost'
        WHEN end_reason IN ('killed_on_teardown', 'killed_on_recovery') THEN 'killed'
        WHEN term_signal IS NOT NULL THEN 'killed'
        WHEN exit_code = 0 THEN 'ok'
        WHEN exit_code IS NOT NULL THEN 'failed'
        ELSE 'unknown' END;
