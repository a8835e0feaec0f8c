-- Bench row 2: two costs on the write path of every snapshot.
--
-- 1. 0001's snapshot_notify trigger ran a PL/pgSQL call for every snapshot row
-- written (each claim, renewal and seal) and NOTIFYed snapshot_sealed /
-- snapshot_due, but no process LISTENs on either channel: a crawl worker learns
-- of its snapshots from its snapshot workers' pidfds and from the rows it
-- claims (crawl_worker/crawl_run.cpp). Each NOTIFY still cost its commit the
-- cluster-wide notify lock, a write to the notification queue, and a signal to
-- every listening backend of the database (the orchestrator's, each crawl
-- worker's), which then woke up to read and discard it. crawl_notify
-- (crawl_due, crawl_cancel) stays: both have listeners.
DROP TRIGGER snapshot_notify ON snapshot;
DROP FUNCTION notify_snapshot_change();

-- 2. archive_result_plugin_idx covered (plugin, status). A result's status
-- changes on every write (queued -> started -> its outcome), so no result
-- update could be HOT: each wrote a new entry into all three indexes of the
-- table. No query filters on plugin and status together (the ops views group
-- the whole table); the index keeps plugin alone, which never changes. With
-- room left on each page, a result update is then one heap record.
DROP INDEX archive_result_plugin_idx;
CREATE INDEX archive_result_plugin_idx ON archive_result (plugin);
ALTER TABLE archive_result SET (fillfactor = 85);
