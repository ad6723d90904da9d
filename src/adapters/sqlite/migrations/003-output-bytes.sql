-- summary: a running task's output tail and its byte count
--
-- A running task's output tail is written while it runs (dagbot logs --follow); with
-- the bytes written in all, a reader knows which part of a new tail it has not shown yet.

ALTER TABLE tasks ADD COLUMN output_bytes INTEGER;
