-- What each process cost: CPU time (user and system, seconds), from the
-- waitid() that reaped it. Like time(1), a process's figures
-- include the descendants it waited for: a hook's include its own children, a
-- snapshot worker's include its hooks, an orchestrator's everything it ran.
-- NULL for a process nobody reaped (lost, or killed on recovery). A process
-- writes its own figures when it ends (a worker run by hand has no reaper of
-- ours); the reaper's later write replaces them with the kernel's final ones.
-- No peak RSS: a child started with vfork semantics reports its launcher's
-- resident set at exec as its own peak (common/resource_usage.hpp).
ALTER TABLE process
    ADD COLUMN cpu_user_s double precision,
    ADD COLUMN cpu_system_s double precision;

-- The exits view carries them for dashboards (added at the end: same columns before).
CREATE OR REPLACE VIEW ops.process_exits WITH (security_barrier) AS
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
       p.stderr_tail,
       p.cpu_user_s,
       p.cpu_system_s,
       p.cpu_user_s + p.cpu_system_s AS cpu_s
FROM process p
WHERE p.status = 'exited';
