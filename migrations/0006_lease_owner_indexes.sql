-- Recovery scaled with history (bench row 7's database): every 15 s the
-- orchestrator looks for leases whose owner has exited or stalled
-- (orchestrator/work_queue.cpp), and nothing indexed snapshot.lease_owner or
-- crawl.lease_owner. With 1M sealed snapshots each pass read the whole snapshot
-- table twice (about 100 ms each on 2 cores), holding up the daemon's loop:
-- a crawl added meanwhile waited that long to start.
--
-- A lease exists only while a worker holds it, so these indexes hold one entry
-- per running worker, whatever the history. A claim writes its entry (claims
-- change status, so they were never HOT); a renewal does not change the owner
-- and stays HOT; a seal or release clears the owner and adds nothing.
CREATE INDEX snapshot_leased_idx ON snapshot (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX crawl_leased_idx ON crawl (lease_owner) WHERE lease_owner IS NOT NULL;
