-- Bench row 2: every hook start inserts a process row, and the
-- foreign keys of its label columns (machine_id, crawl_id, snapshot_id,
-- archive_result_id) made each insert run four referential checks, each a
-- lookup that takes a KEY SHARE lock on a row that every hook of the machine or
-- the crawl shares. Measured in the 2,000-snapshot crawl: 0.27 ms per insert
-- with them, 0.14 ms without (pg_stat_statements, same run conditions).
--
-- The writers only ever store ids they read from those rows (the crawl and
-- snapshot a worker holds the lease on, the machine it registered), and the
-- system never deletes a machine, crawl, snapshot or result (prune deletes
-- process rows only). What the keys still gave, ON DELETE SET NULL for a row
-- deleted by hand, is kept below by statement-level triggers: deletes are
-- rare, inserts are the hot path. parent_id keeps its foreign key: the tree
-- is the table's point, and prune relies on its ON DELETE SET NULL.
ALTER TABLE process
    DROP CONSTRAINT process_machine_id_fkey,
    DROP CONSTRAINT process_crawl_id_fkey,
    DROP CONSTRAINT process_snapshot_id_fkey,
    DROP CONSTRAINT process_archive_result_fk;

-- The deleted rows' ids are in `gone`; TG_ARGV[0] names the label column.
CREATE FUNCTION process_unlabel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('UPDATE process p SET %1$I = NULL FROM gone WHERE p.%1$I = gone.id', TG_ARGV[0]);
    RETURN NULL;
END $$;
CREATE TRIGGER process_unlabel AFTER DELETE ON crawl
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION process_unlabel('crawl_id');
CREATE TRIGGER process_unlabel AFTER DELETE ON snapshot
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION process_unlabel('snapshot_id');
CREATE TRIGGER process_unlabel AFTER DELETE ON archive_result
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION process_unlabel('archive_result_id');

-- A machine with process rows stays (the foreign key's NO ACTION): its rows
-- name their pids by it.
CREATE FUNCTION process_keep_machine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM process p JOIN gone ON p.machine_id = gone.id) THEN
        RAISE foreign_key_violation USING MESSAGE = 'machine has process rows';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER process_keep_machine AFTER DELETE ON machine
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION process_keep_machine();
