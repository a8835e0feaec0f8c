-- Core schema: machines, processes, crawls, snapshots, archive results, schedules.
-- Table and column names are a public interface: dashboards read them.

CREATE TABLE machine (
    id          text PRIMARY KEY CHECK (id <> '' AND length(id) <= 128),
    hostname    text NOT NULL,
    boot_id     text NOT NULL,
    cpu_count   integer NOT NULL CHECK (cpu_count > 0),
    containment text,                              -- cgroup2 | freezer | fallback, as probed
    first_seen  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE crawl_schedule (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    template    jsonb NOT NULL CHECK (jsonb_typeof(template) = 'object'),
    schedule    text NOT NULL CHECK (schedule <> ''),  -- cron expression or alias (@daily ...)
    enabled     boolean NOT NULL DEFAULT true,
    label       text,
    last_run_at timestamptz,
    next_run_at timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    modified_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crawl_schedule_due_idx ON crawl_schedule (next_run_at) WHERE enabled;

CREATE TABLE crawl (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    urls             text[] NOT NULL CHECK (cardinality(urls) > 0),
    config           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
    max_depth        integer NOT NULL DEFAULT 0 CHECK (max_depth BETWEEN 0 AND 100),
    max_urls         integer CHECK (max_urls > 0),
    timeout_s        integer CHECK (timeout_s > 0),
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'started', 'paused', 'sealed')),
    -- How a sealed crawl ended; NULL until sealed.
    outcome          text CHECK (outcome IN ('succeeded', 'partial', 'failed', 'cancelled', 'timed_out')),
    seal_reason      text,
    cancel_requested_at timestamptz,
    retry_at         timestamptz DEFAULT now(),    -- due time; NULL when not due (sealed/paused)
    lease_owner      uuid,                         -- process.id of the holder
    lease_expires_at timestamptz,
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    label            text,
    tags             text[] NOT NULL DEFAULT '{}',
    schedule_id      uuid REFERENCES crawl_schedule (id) ON DELETE SET NULL,
    schedule_due_at  timestamptz,                  -- which tick of the schedule made this crawl
    created_at       timestamptz NOT NULL DEFAULT now(),
    modified_at      timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    sealed_at        timestamptz,
    CHECK ((status = 'sealed') = (outcome IS NOT NULL)),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);
CREATE INDEX crawl_due_idx ON crawl (retry_at, created_at) WHERE status IN ('queued', 'started');
CREATE INDEX crawl_status_idx ON crawl (status);
-- A schedule tick enqueues at most one crawl, whatever the number of orchestrators.
CREATE UNIQUE INDEX crawl_schedule_tick_uniq ON crawl (schedule_id, schedule_due_at)
    WHERE schedule_id IS NOT NULL;

CREATE TABLE snapshot (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    crawl_id           uuid NOT NULL REFERENCES crawl (id) ON DELETE CASCADE,
    parent_snapshot_id uuid REFERENCES snapshot (id) ON DELETE SET NULL,
    url                text NOT NULL CHECK (url <> '' AND length(url) <= 8192),
    depth              integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
    title              text,
    status             text NOT NULL DEFAULT 'queued'
                       CHECK (status IN ('queued', 'started', 'sealed')),
    outcome            text CHECK (outcome IN ('succeeded', 'partial', 'failed', 'cancelled', 'timed_out')),
    error              text,
    retry_at           timestamptz DEFAULT now(),
    lease_owner        uuid,
    lease_expires_at   timestamptz,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    modified_at        timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    sealed_at          timestamptz,
    UNIQUE (crawl_id, url),
    CHECK ((status = 'sealed') = (outcome IS NOT NULL)),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);
CREATE INDEX snapshot_due_idx ON snapshot (crawl_id, retry_at, created_at)
    WHERE status IN ('queued', 'started');
CREATE INDEX snapshot_crawl_status_idx ON snapshot (crawl_id, status);

CREATE TABLE process (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    machine_id        text NOT NULL REFERENCES machine (id),
    parent_id         uuid REFERENCES process (id) ON DELETE SET NULL,
    process_type      text NOT NULL
                      CHECK (process_type IN ('orchestrator', 'worker', 'hook', 'cli', 'server')),
    worker_type       text CHECK (worker_type IN ('crawl', 'snapshot')),
    status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'exited')),
    -- OS identity: (machine, boot_id, pid, start_ticks) names one process forever;
    -- pidfs_ino is exact on kernels >= 6.9, cookie is inherited by the whole tree.
    pid               integer CHECK (pid > 0),
    boot_id           text,
    start_ticks       bigint,
    pidfs_ino         bigint,
    pgid              integer,
    cookie            text,
    containment       text CHECK (containment IN ('cgroup2', 'freezer', 'fallback', 'none')),
    cgroup_path       text,
    data_dir          text,
    cmd               jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(cmd) = 'array'),
    env               jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(env) = 'object'),
    pwd               text,
    timeout_s         double precision CHECK (timeout_s > 0),
    exit_code         integer,
    term_signal       integer CHECK (term_signal > 0),
    -- Why the row ended when the process was not simply reaped by its owner:
    -- exited | timed_out | killed_on_teardown | killed_on_recovery | lost | pid_reused | boot_changed | spawn_failed
    end_reason        text,
    stdout_path       text,
    stderr_path       text,
    stdout_tail       text,
    stderr_tail       text,
    crawl_id          uuid REFERENCES crawl (id) ON DELETE SET NULL,
    snapshot_id       uuid REFERENCES snapshot (id) ON DELETE SET NULL,
    archive_result_id uuid,
    plugin            text,
    hook_name         text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    ended_at          timestamptz,
    heartbeat_at      timestamptz,
    CHECK (worker_type IS NULL OR process_type = 'worker'),
    CHECK (status <> 'running' OR pid IS NOT NULL),
    CHECK (status <> 'exited' OR ended_at IS NOT NULL)
);
-- The single-runner gate: one running orchestrator per (machine, data directory).
CREATE UNIQUE INDEX process_one_orchestrator_idx ON process (machine_id, data_dir)
    WHERE process_type = 'orchestrator' AND status = 'running';
CREATE INDEX process_live_idx ON process (machine_id, status) WHERE status <> 'exited';
CREATE INDEX process_parent_idx ON process (parent_id);
CREATE INDEX process_crawl_idx ON process (crawl_id) WHERE crawl_id IS NOT NULL;
CREATE INDEX process_snapshot_idx ON process (snapshot_id) WHERE snapshot_id IS NOT NULL;
CREATE INDEX process_ended_idx ON process (ended_at) WHERE status = 'exited';

CREATE TABLE archive_result (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    snapshot_id  uuid NOT NULL REFERENCES snapshot (id) ON DELETE CASCADE,
    plugin       text NOT NULL CHECK (plugin <> ''),
    hook_name    text NOT NULL CHECK (hook_name <> ''),
    process_id   uuid REFERENCES process (id) ON DELETE SET NULL,
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'started', 'succeeded', 'failed', 'skipped', 'noresults')),
    output_str   text,
    output_json  jsonb,
    output_files jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(output_files) = 'array'),
    output_size  bigint NOT NULL DEFAULT 0 CHECK (output_size >= 0),
    error        text,
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    start_ts     timestamptz,
    end_ts       timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    modified_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (snapshot_id, hook_name)
);
CREATE INDEX archive_result_plugin_idx ON archive_result (plugin, status);

ALTER TABLE process ADD CONSTRAINT process_archive_result_fk
    FOREIGN KEY (archive_result_id) REFERENCES archive_result (id) ON DELETE SET NULL;

-- Wake-ups. Listeners treat these as hints and re-read the tables.
CREATE FUNCTION notify_crawl_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('queued', 'started') AND NEW.retry_at IS NOT NULL AND NEW.lease_owner IS NULL
       AND (TG_OP = 'INSERT' OR OLD.lease_owner IS NOT NULL OR OLD.status IS DISTINCT FROM NEW.status
            OR OLD.retry_at IS DISTINCT FROM NEW.retry_at) THEN
        PERFORM pg_notify('crawl_due', NEW.id::text);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL THEN
        PERFORM pg_notify('crawl_cancel', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER crawl_notify AFTER INSERT OR UPDATE ON crawl
    FOR EACH ROW EXECUTE FUNCTION notify_crawl_due();

CREATE FUNCTION notify_snapshot_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'sealed' AND (TG_OP = 'INSERT' OR OLD.status <> 'sealed') THEN
        PERFORM pg_notify('snapshot_sealed', NEW.crawl_id::text);
    ELSIF NEW.status IN ('queued', 'started') AND NEW.lease_owner IS NULL
          AND (TG_OP = 'INSERT' OR OLD.lease_owner IS NOT NULL) THEN
        PERFORM pg_notify('snapshot_due', NEW.crawl_id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER snapshot_notify AFTER INSERT OR UPDATE ON snapshot
    FOR EACH ROW EXECUTE FUNCTION notify_snapshot_change();
