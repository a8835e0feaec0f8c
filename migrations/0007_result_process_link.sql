-- prune deletes exited process rows, and archive_result.process_id referenced
-- them through a foreign key ON DELETE SET NULL with no index on process_id:
-- each deleted row's action was a sequential scan of archive_result. With 1M
-- results, deleting 20 rows took 1.9 s: pruning a long history (prune's
-- purpose) would have taken a day. An index on process_id would fix that, but
-- the column is set when a hook starts, and it would cost that update its HOT
-- write and every result an index entry; the key also cost that update a
-- referential check that locks the process row (with parent_id's, the
-- foreign-key checks were 6% of the server's CPU in bench row 2).
--
-- As for the process table's labels (0004): the writer stores the id of the row
-- it just inserted for that result, and a hook's process row carries the
-- result's id (archive_result_id). A statement-level trigger clears the link of
-- deleted process rows through that label and the result's primary key, one
-- join per DELETE statement; a link from a row without the label (never written
-- by the workers) is left as it was.
ALTER TABLE archive_result DROP CONSTRAINT archive_result_process_id_fkey;

CREATE FUNCTION archive_result_unlink_process() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE archive_result ar SET process_id = NULL
    FROM gone
    WHERE gone.archive_result_id IS NOT NULL AND ar.id = gone.archive_result_id AND ar.process_id = gone.id;
    RETURN NULL;
END $$;
CREATE TRIGGER archive_result_unlink_process AFTER DELETE ON process
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION archive_result_unlink_process();
