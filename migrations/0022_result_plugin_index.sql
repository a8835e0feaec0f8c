-- Bench row 2: one index fewer to keep up on the rows every snapshot
-- writes. archive_result_plugin_idx (plugin) was kept by 0005 for a filter on
-- the plugin that no statement, view or dashboard makes (the ops views group
-- the whole table): each snapshot's result inserts paid an entry in it, and
-- each statement writing the table opened it.
DROP INDEX archive_result_plugin_idx;
