-- summary: nodes register their actions' argument rules; room permissions in the store
--
-- Nodes register what their actions accept, so the leader checks arguments at publish;
-- the room's permissions live in the store so that every node enforces the same ones.

ALTER TABLE nodes ADD COLUMN action_specs TEXT NOT NULL DEFAULT '{}';

CREATE TABLE room_policies (
  room_id    TEXT PRIMARY KEY,
  policy     TEXT NOT NULL,
  set_by     TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
