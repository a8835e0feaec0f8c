-- Crawl scope: which discovered URLs may become a crawl's snapshots
-- (common/url/crawl_scope.hpp, docs/urls-and-scope.md): 'page' (the seeds
-- only), 'prefix' (under a seed's directory), 'host' (the seeds' hosts and
-- their www. twins), 'domain' (their registrable domains), 'any'.
-- Crawls that exist when this runs get 'any': they followed every link they
-- found, and keep doing so. Crawls added afterwards default to 'host'. A
-- constant default adds the column without rewriting the table.
ALTER TABLE crawl ADD COLUMN scope text NOT NULL DEFAULT 'any'
    CHECK (scope IN ('page', 'prefix', 'host', 'domain', 'any'));
ALTER TABLE crawl ALTER COLUMN scope SET DEFAULT 'host';

-- Links a crawl found and did not follow, with why: 'out_of_scope' (outside
-- its scope) or 'denied' (url_allow / url_deny). Written with the child
-- snapshots of the page that found them, in the same statement
-- (snapshot_worker/snapshot_store.cpp). A crawl lists at most its first 10,000
-- distinct URLs (concurrent pages may each fill the last room, so a few more);
-- a link found once the list is full is only counted, by reason, in
-- crawl_skipped_count (every such link found, not distinct URLs).
CREATE TABLE crawl_skipped_url (
    crawl_id      uuid NOT NULL REFERENCES crawl (id) ON DELETE CASCADE,
    url           text NOT NULL,
    reason        text NOT NULL CHECK (reason IN ('out_of_scope', 'denied')),
    -- The snapshot whose links had it first. No foreign key: every delete of
    -- a snapshot would have to look for rows naming it.
    found_on      uuid NOT NULL,
    found_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (crawl_id, url)
);

CREATE TABLE crawl_skipped_count (
    crawl_id      uuid NOT NULL REFERENCES crawl (id) ON DELETE CASCADE,
    reason        text NOT NULL CHECK (reason IN ('out_of_scope', 'denied')),
    unlisted      bigint NOT NULL CHECK (unlisted >= 0),
    PRIMARY KEY (crawl_id, reason)
);
