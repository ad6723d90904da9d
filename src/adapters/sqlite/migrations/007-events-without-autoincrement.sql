-- summary: the event log without AUTOINCREMENT
--
-- Events without AUTOINCREMENT. Every event line also rewrote its sqlite_sequence row,
-- a page of WAL per commit on the claim path. A plain INTEGER PRIMARY KEY takes the largest seq
-- + 1, which never goes back while the largest row stays: retention keeps the newest event, and
-- a seq handed out before whose row is gone is kept by a mark (no room, so no reader sees it).

CREATE TABLE events_next (
  seq     INTEGER PRIMARY KEY,
  room_id TEXT NOT NULL,
  at      INTEGER NOT NULL,
  kind    TEXT NOT NULL,
  run_id  TEXT,
  task_id TEXT,
  term    INTEGER,
  actor   TEXT,
  data    TEXT NOT NULL
) STRICT;
INSERT INTO events_next (seq, room_id, at, kind, run_id, task_id, term, actor, data)
  SELECT seq, room_id, at, kind, run_id, task_id, term, actor, data FROM events;
INSERT INTO events_next (seq, room_id, at, kind, data)
  SELECT seq, '', 0, 'store.seq_mark', '{}' FROM sqlite_sequence
   WHERE name = 'events' AND seq > (SELECT COALESCE(MAX(seq), 0) FROM events);
DROP TABLE events;
ALTER TABLE events_next RENAME TO events;
CREATE INDEX events_room_seq ON events (room_id, seq);
