-- A sealed crawl claims nothing more: its per-host claim times (0016) go with
-- its seal, whichever path seals it (its crawl worker, `orchestrator cancel`,
-- any later one), so crawl_host_claim holds the hosts of the crawls being run,
-- not of every crawl ever run with per-host rules (`prune` keeps crawls). A crawl
-- run again (`retry`) starts owing no delay, as a new crawl would.
-- The trigger fires on the few status changes of a crawl row, never on the
-- snapshot writes of the hot path.
CREATE FUNCTION crawl_host_claim_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM crawl_host_claim WHERE crawl_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER crawl_host_claim_forget AFTER UPDATE OF status ON crawl
    FOR EACH ROW WHEN (NEW.status = 'sealed' AND OLD.status IS DISTINCT FROM 'sealed')
    EXECUTE FUNCTION crawl_host_claim_forget();

-- What the crawls sealed before this migration left behind.
DELETE FROM crawl_host_claim h USING crawl c WHERE c.id = h.crawl_id AND c.status = 'sealed';
