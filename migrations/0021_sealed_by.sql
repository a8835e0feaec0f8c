-- Who sealed a snapshot or a crawl: the process row id of the worker whose seal
-- it was (the lease owner it sealed as). NULL for rows sealed before this
-- migration and for seals made by an operator's command (`orchestrator cancel`);
-- set back to NULL when `orchestrator retry` queues the row again. Not a foreign
-- key: process rows are pruned by retention long before the crawls they ran.
--
-- Besides telling an operator which worker sealed what, it lets a worker
-- recognise its own seal. A seal commits in one statement that also clears the
-- lease; when the connection breaks between that commit and its reply, the
-- worker runs the statement again on a new connection (common/database_outage.hpp,
-- ride_out) and finds the lease gone. Without a record of who sealed, that
-- looked the same as a lease taken over by another worker (exit 8, "lease
-- lost") although the work was done and recorded; with it, the retry reads the
-- committed seal as its own and goes on.

ALTER TABLE snapshot ADD COLUMN sealed_by uuid;
ALTER TABLE crawl ADD COLUMN sealed_by uuid;
