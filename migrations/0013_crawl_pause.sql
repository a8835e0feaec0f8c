-- Pausing a crawl (`orchestrator pause` / `resume`, and a crawl worker that
-- finds the crawl's own configuration refused). 'paused' was in the status
-- domain from 0001 but nothing set it.
--
-- A crawl worker that holds a crawl being paused (or resumed while it drains)
-- must hear of it at once, as it hears of a cancellation: the status change
-- now also wakes the `crawl_cancel` channel, the crawl workers' "look at your
-- crawl row again" hint.
CREATE OR REPLACE FUNCTION notify_crawl_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('queued', 'started') AND NEW.retry_at IS NOT NULL AND NEW.lease_owner IS NULL
       AND (TG_OP = 'INSERT' OR OLD.lease_owner IS NOT NULL OR OLD.status IS DISTINCT FROM NEW.status
            OR OLD.retry_at IS DISTINCT FROM NEW.retry_at) THEN
        PERFORM pg_notify('crawl_due', NEW.id::text);
    END IF;
    IF TG_OP = 'UPDATE'
       AND ((NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL)
            OR (NEW.lease_owner IS NOT NULL AND (NEW.status = 'paused') <> (OLD.status = 'paused'))) THEN
        PERFORM pg_notify('crawl_cancel', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;

-- A crawl's timeout counts its running time, not the time it spent paused:
-- `paused_s` sums the pauses that ended (resume adds the last one), `paused_at`
-- is when the current one began.
ALTER TABLE crawl
    ADD COLUMN paused_at timestamptz,
    ADD COLUMN paused_s double precision NOT NULL DEFAULT 0 CHECK (paused_s >= 0);

-- A paused crawl is never due, whatever its retry_at: every claim of a crawl or
-- of its snapshots reads the status. Nothing set 'paused' before this migration.
