-- summary: drops an index no query used (tasks_open)
--
-- `tasks_open` goes. No query could use it: SQLite takes a partial index only when the
-- query's WHERE implies the index's, and none of the open-task reads names its exact status list
-- (INDEXED BY tasks_open fails to plan for each of them). Yet every claim wrote two of its pages
-- (out of the queued entries, into the running ones) and every finish one: three WAL pages per
-- claim+finish pair for nothing. The reads use tasks_claim (queued) and tasks_executor (running).

DROP INDEX tasks_open;
