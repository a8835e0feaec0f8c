-- `orchestrator crawls` lists the newest crawls first: an index on the creation
-- time lets it read the newest N, with their filters, without sorting every
-- crawl ever added. A crawl is written a few times in its life: the index costs
-- nothing on the per-snapshot path.
CREATE INDEX crawl_created_idx ON crawl (created_at);
