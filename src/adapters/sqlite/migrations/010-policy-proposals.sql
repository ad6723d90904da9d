-- summary: policy changes waiting for a second admin
--
-- Under the two-person rule a room admin's policy change waits here for a second
-- admin's confirmation (or its expiry); applied ones stay as the record of who agreed.

CREATE TABLE policy_proposals (
  room_id      TEXT NOT NULL,
  change_id    TEXT NOT NULL,
  change       TEXT NOT NULL,
  proposed_by  TEXT NOT NULL,
  proposed_at  INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('pending', 'applied')),
  confirmed_by TEXT,
  confirmed_at INTEGER,
  PRIMARY KEY (room_id, change_id)
) STRICT;
