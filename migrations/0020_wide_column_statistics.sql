-- No planner statistics for the wide columns of the hot tables that no query
-- filters, joins or sorts on: a process's command line, environment, paths and
-- output tails; a result's output and error; a snapshot's title and error.
--
-- ANALYZE (autovacuum runs it on process after every 5% of changes) reads its
-- 30,000-row sample of each of these, sorts the values and keeps the most common
-- ones and a histogram, for a planner that never asks. Measured on 300k process
-- rows as a crawl of no-op hooks writes them (a 600 bytes environment, 200 bytes
-- command line, three 140 bytes paths): ANALYZE process took 1.21-1.56 s with
-- them and 0.68-0.79 s without, three runs each.
--
-- The columns a query does filter on keep their statistics: ids, status, type,
-- machine, cookie, boot id, data directory, plugin and hook names, times, url.

ALTER TABLE process
    ALTER COLUMN cmd SET STATISTICS 0,
    ALTER COLUMN env SET STATISTICS 0,
    ALTER COLUMN pwd SET STATISTICS 0,
    ALTER COLUMN cgroup_path SET STATISTICS 0,
    ALTER COLUMN stdout_path SET STATISTICS 0,
    ALTER COLUMN stderr_path SET STATISTICS 0,
    ALTER COLUMN stdout_tail SET STATISTICS 0,
    ALTER COLUMN stderr_tail SET STATISTICS 0;

ALTER TABLE archive_result
    ALTER COLUMN output_str SET STATISTICS 0,
    ALTER COLUMN output_json SET STATISTICS 0,
    ALTER COLUMN output_files SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0;

ALTER TABLE snapshot
    ALTER COLUMN title SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0;
