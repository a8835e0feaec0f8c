-- The rules of the hot tables (process, snapshot, archive_result), one CHECK per
-- table instead of one per rule.
--
-- PostgreSQL does not keep a table's CHECK constraints compiled between
-- statements: every statement that writes the table reads each constraint's
-- stored expression back from its text form and plans it again, once per table
-- it writes (so a statement with three UPDATE CTEs on process does it three
-- times). With 25 constraints over these tables, that was about 10% of the CPU
-- of a crawl of no-op hooks (perf: ExecConstraints -> stringToNode, 5% of all
-- machine samples). A constraint calling a PL/pgSQL function costs one small
-- expression per statement; the function's body is compiled once per
-- connection, and its common case is one evaluation of the rules joined by AND.
--
-- The rules are those of 0001, unchanged, with CHECK's meaning: a rule that
-- comes out NULL passes. A row that breaks one is refused with check_violation
-- (SQLSTATE 23514) as before, and the message now says which rule and what value.
-- crawl keeps its own constraints: it is written a few times per crawl.

ALTER TABLE process
    DROP CONSTRAINT process_process_type_check,
    DROP CONSTRAINT process_worker_type_check,
    DROP CONSTRAINT process_status_check,
    DROP CONSTRAINT process_pid_check,
    DROP CONSTRAINT process_containment_check,
    DROP CONSTRAINT process_cmd_check,
    DROP CONSTRAINT process_env_check,
    DROP CONSTRAINT process_timeout_s_check,
    DROP CONSTRAINT process_term_signal_check,
    DROP CONSTRAINT process_check,
    DROP CONSTRAINT process_check1,
    DROP CONSTRAINT process_check2;

ALTER TABLE snapshot
    DROP CONSTRAINT snapshot_url_check,
    DROP CONSTRAINT snapshot_depth_check,
    DROP CONSTRAINT snapshot_status_check,
    DROP CONSTRAINT snapshot_outcome_check,
    DROP CONSTRAINT snapshot_attempts_check,
    DROP CONSTRAINT snapshot_check,
    DROP CONSTRAINT snapshot_check1;

ALTER TABLE archive_result
    DROP CONSTRAINT archive_result_plugin_check,
    DROP CONSTRAINT archive_result_hook_name_check,
    DROP CONSTRAINT archive_result_status_check,
    DROP CONSTRAINT archive_result_output_files_check,
    DROP CONSTRAINT archive_result_output_size_check,
    DROP CONSTRAINT archive_result_attempts_check;

-- Refuses a row of `tbl`, naming each rule it breaks (`broken`: the rules' texts
-- with the offending values); a row check function's slow path.
CREATE FUNCTION refuse_row(tbl text, constraint_name text, broken text[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RAISE check_violation USING
        MESSAGE = format('new row for relation "%s" breaks its rules: %s', tbl,
                         coalesce(array_to_string(broken, '; '), 'unknown rule')),
        TABLE = tbl, CONSTRAINT = constraint_name;
END $$;

CREATE FUNCTION process_row_ok(process_type text, worker_type text, status text, pid integer, containment text,
                               cmd jsonb, env jsonb, timeout_s double precision, term_signal integer,
                               ended_at timestamptz)
    RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF (process_type IN ('orchestrator', 'worker', 'hook', 'cli', 'server')
        AND worker_type IN ('crawl', 'snapshot')
        AND status IN ('queued', 'running', 'exited')
        AND pid > 0
        AND containment IN ('cgroup2', 'freezer', 'fallback', 'none')
        AND jsonb_typeof(cmd) = 'array'
        AND jsonb_typeof(env) = 'object'
        AND timeout_s > 0
        AND term_signal > 0
        AND (worker_type IS NULL OR process_type = 'worker')
        AND (status <> 'running' OR pid IS NOT NULL)
        AND (status <> 'exited' OR ended_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    RETURN refuse_row('process', 'process_row_check', array_remove(ARRAY[
        CASE WHEN (process_type IN ('orchestrator', 'worker', 'hook', 'cli', 'server')) IS FALSE
             THEN format('process_type %L is not orchestrator, worker, hook, cli or server', process_type) END,
        CASE WHEN (worker_type IN ('crawl', 'snapshot')) IS FALSE
             THEN format('worker_type %L is not crawl or snapshot', worker_type) END,
        CASE WHEN (status IN ('queued', 'running', 'exited')) IS FALSE
             THEN format('status %L is not queued, running or exited', status) END,
        CASE WHEN (pid > 0) IS FALSE THEN format('pid %s is not positive', pid) END,
        CASE WHEN (containment IN ('cgroup2', 'freezer', 'fallback', 'none')) IS FALSE
             THEN format('containment %L is not cgroup2, freezer, fallback or none', containment) END,
        CASE WHEN (jsonb_typeof(cmd) = 'array') IS FALSE THEN 'cmd is not a JSON array' END,
        CASE WHEN (jsonb_typeof(env) = 'object') IS FALSE THEN 'env is not a JSON object' END,
        CASE WHEN (timeout_s > 0) IS FALSE THEN format('timeout_s %s is not positive', timeout_s) END,
        CASE WHEN (term_signal > 0) IS FALSE THEN format('term_signal %s is not positive', term_signal) END,
        CASE WHEN (worker_type IS NULL OR process_type = 'worker') IS FALSE
             THEN format('worker_type is set on a %s row', process_type) END,
        CASE WHEN (status <> 'running' OR pid IS NOT NULL) IS FALSE THEN 'a running process has no pid' END,
        CASE WHEN (status <> 'exited' OR ended_at IS NOT NULL) IS FALSE THEN 'an exited process has no ended_at' END
    ], NULL));
END $$;

CREATE FUNCTION snapshot_row_ok(url text, depth integer, status text, outcome text, attempts integer,
                                lease_owner uuid, lease_expires_at timestamptz)
    RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF (url <> '' AND length(url) <= 8192
        AND depth >= 0
        AND status IN ('queued', 'started', 'sealed')
        AND outcome IN ('succeeded', 'partial', 'failed', 'cancelled', 'timed_out')
        AND attempts >= 0
        AND (status = 'sealed') = (outcome IS NOT NULL)
        AND (lease_owner IS NULL) = (lease_expires_at IS NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    RETURN refuse_row('snapshot', 'snapshot_row_check', array_remove(ARRAY[
        CASE WHEN (url <> '' AND length(url) <= 8192) IS FALSE THEN 'url is empty or longer than 8192 bytes' END,
        CASE WHEN (depth >= 0) IS FALSE THEN format('depth %s is negative', depth) END,
        CASE WHEN (status IN ('queued', 'started', 'sealed')) IS FALSE
             THEN format('status %L is not queued, started or sealed', status) END,
        CASE WHEN (outcome IN ('succeeded', 'partial', 'failed', 'cancelled', 'timed_out')) IS FALSE
             THEN format('outcome %L is not succeeded, partial, failed, cancelled or timed_out', outcome) END,
        CASE WHEN (attempts >= 0) IS FALSE THEN format('attempts %s is negative', attempts) END,
        CASE WHEN ((status = 'sealed') = (outcome IS NOT NULL)) IS FALSE
             THEN 'a sealed snapshot, and only a sealed one, has an outcome' END,
        CASE WHEN ((lease_owner IS NULL) = (lease_expires_at IS NULL)) IS FALSE
             THEN 'lease_owner and lease_expires_at are set together' END
    ], NULL));
END $$;

CREATE FUNCTION archive_result_row_ok(plugin text, hook_name text, status text, output_files jsonb,
                                      output_size bigint, attempts integer)
    RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF (plugin <> ''
        AND hook_name <> ''
        AND status IN ('queued', 'started', 'succeeded', 'failed', 'skipped', 'noresults')
        AND jsonb_typeof(output_files) = 'array'
        AND output_size >= 0
        AND attempts >= 0) IS NOT FALSE THEN
        RETURN true;
    END IF;
    RETURN refuse_row('archive_result', 'archive_result_row_check', array_remove(ARRAY[
        CASE WHEN (plugin <> '') IS FALSE THEN 'plugin is empty' END,
        CASE WHEN (hook_name <> '') IS FALSE THEN 'hook_name is empty' END,
        CASE WHEN (status IN ('queued', 'started', 'succeeded', 'failed', 'skipped', 'noresults')) IS FALSE
             THEN format('status %L is not queued, started, succeeded, failed, skipped or noresults', status) END,
        CASE WHEN (jsonb_typeof(output_files) = 'array') IS FALSE THEN 'output_files is not a JSON array' END,
        CASE WHEN (output_size >= 0) IS FALSE THEN format('output_size %s is negative', output_size) END,
        CASE WHEN (attempts >= 0) IS FALSE THEN format('attempts %s is negative', attempts) END
    ], NULL));
END $$;

ALTER TABLE process ADD CONSTRAINT process_row_check
    CHECK (process_row_ok(process_type, worker_type, status, pid, containment, cmd, env, timeout_s, term_signal,
                          ended_at));
ALTER TABLE snapshot ADD CONSTRAINT snapshot_row_check
    CHECK (snapshot_row_ok(url, depth, status, outcome, attempts, lease_owner, lease_expires_at));
ALTER TABLE archive_result ADD CONSTRAINT archive_result_row_check
    CHECK (archive_result_row_ok(plugin, hook_name, status, output_files, output_size, attempts));
