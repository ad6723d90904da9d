-- summary: run lists paged by creation time, by status
--
-- Run lists are paged newest first by (created_at, seq), filtered by status. The room's
-- list has runs_room_created and a definition's runs_definition; a status filter gets its own, in
-- list order, so a page of e.g. failed runs reads that page, not every run of the room since.

CREATE INDEX runs_room_status_created ON runs (room_id, status, created_at DESC, seq DESC);
