-- Politeness: at most `max_per_host` snapshots of one host run at once in a
-- crawl, and at least `host_delay_s` seconds between the starts of two of them
-- (NULL: no limit, as before). A crawl of one site with 8 snapshot workers
-- otherwise opens 8 browsers on it at once, and sites ban archivers for less.
--
-- The host is read from the URL when a claim needs it (url_host), not stored:
-- a claim compares a candidate with the crawl's running snapshots only, at most
-- as many as it has workers, and a stored column would rewrite a table of
-- millions of snapshots to add it. Claims of a limited crawl take a transaction
-- lock on the crawl first (common/snapshot_claims.cpp), so that two claimers
-- never both see a free slot for the same host.
ALTER TABLE crawl ADD COLUMN max_per_host integer CHECK (max_per_host > 0);

-- The host of an absolute URL, lower-cased, without user info or port ('' when
-- there is none).
CREATE FUNCTION url_host(url text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(lower(substring(url FROM '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]]*\]|[^/?#:]*)')), '');

-- And at least `host_delay_s` seconds between two claims of snapshots of one
-- host in a crawl (NULL: none). The last claim of each host is kept here by the
-- claims of crawls that have either rule.
ALTER TABLE crawl ADD COLUMN host_delay_s double precision CHECK (host_delay_s > 0);

CREATE TABLE crawl_host_claim (
    crawl_id        uuid NOT NULL REFERENCES crawl (id) ON DELETE CASCADE,
    host            text NOT NULL,
    last_claimed_at timestamptz NOT NULL,
    PRIMARY KEY (crawl_id, host)
);
