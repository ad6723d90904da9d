-- summary: tasks' declared outputs and published values
--
-- A task's declared outputs (name → pattern, JSON; NULL when none), for its worker to
-- check what the action published, and the values it published (JSON; written with its success).

ALTER TABLE tasks ADD COLUMN output_patterns TEXT;
ALTER TABLE tasks ADD COLUMN output_values TEXT;
