-- The event journal: operator actions (add, cancel, retry, prune, schedules,
-- the reader role) and the decisions the processes take on their own that an
-- operator asks about afterwards (a crawl claimed, sealed, released or backed
-- off, a snapshot given up after its attempts, a recovery pass that closed or
-- killed something, an orchestrator started, taken over or stopped). One row
-- per event, written in the transaction of the change it describes where there
-- is one. Never on the per-snapshot path: its volume follows crawls and
-- operators, not hooks.
--
-- No foreign keys: the journal outlives the rows it names (prune deletes
-- process rows; `orchestrator prune` deletes events past the same cutoff).
CREATE TABLE event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text NOT NULL CHECK (kind ~ '^[a-z_]+\.[a-z_]+$'),
    actor       text NOT NULL CHECK (actor IN ('cli', 'orchestrator', 'crawl_worker', 'snapshot_worker')),
    os_user     text,          -- who ran the acting process
    machine_id  text,
    process_id  uuid,          -- the acting process's row, when it has one
    crawl_id    uuid,
    snapshot_id uuid,
    message     text NOT NULL CHECK (message <> ''),
    detail      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object')
);
CREATE INDEX event_at_idx ON event (at);
CREATE INDEX event_crawl_idx ON event (crawl_id, at) WHERE crawl_id IS NOT NULL;

-- Newest last when ordered by id (or at).
CREATE VIEW ops.events WITH (security_barrier) AS
SELECT e.id, e.at, e.kind, e.actor, e.os_user, e.machine_id, e.process_id, e.crawl_id, e.snapshot_id,
       e.message, e.detail
FROM event e;
COMMENT ON VIEW ops.events IS 'Operator actions and notable decisions of the processes, one row each (public API)';
