-- summary: run lists paged by creation time
--
-- Run lists are paged newest first by (created_at, rowid), by room, status or
-- definition (runs_definition). An index entry ends with the rowid, so each of these is in list
-- order and a page reads its own rows. The status index replaces (room_id, status), a prefix of it.

CREATE INDEX runs_room_created ON runs (room_id, created_at);
DROP INDEX runs_room_status;
CREATE INDEX runs_room_status ON runs (room_id, status, created_at);
