-- summary: nodes register their actions' argument rules; room permissions in the store
--
-- Nodes register what their actions accept, so the leader checks arguments at publish;
-- the room's permissions live in the store so that every node enforces the same ones.

ALTER TABLE nodes ADD COLUMN action_specs jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE room_policies (
  room_id    text PRIMARY KEY,
  policy     jsonb NOT NULL,
  set_by     text NOT NULL,
  updated_at bigint NOT NULL
);
