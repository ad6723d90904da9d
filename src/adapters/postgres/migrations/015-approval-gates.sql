-- summary: approval gates
--
-- An approval gate is a task that runs nothing. gate: its spec (null for an action);
-- gate_state: set when it opens (approvals, form values, decision). Its timeout is the row's
-- deadline while it is open; tasks_gates_open finds the open ones for the reaper.

ALTER TABLE tasks ADD COLUMN gate jsonb;
ALTER TABLE tasks ADD COLUMN gate_state jsonb;
CREATE INDEX tasks_gates_open ON tasks (room_id, deadline) WHERE status = 'blocked' AND gate_state IS NOT NULL;
