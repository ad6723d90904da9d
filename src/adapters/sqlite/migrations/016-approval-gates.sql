-- summary: approval gates
--
-- An approval gate is a task that runs nothing. gate: its spec as JSON (null for an
-- action); gate_state: set when it opens (approvals, form values, decision). Its timeout is the
-- row's deadline while it is open; tasks_gates_open finds the open ones for the reaper.

ALTER TABLE tasks ADD COLUMN gate TEXT;
ALTER TABLE tasks ADD COLUMN gate_state TEXT;
CREATE INDEX tasks_gates_open ON tasks (room_id, deadline) WHERE status = 'blocked' AND gate_state IS NOT NULL;
