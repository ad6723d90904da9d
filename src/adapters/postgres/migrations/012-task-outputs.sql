-- summary: tasks' declared outputs and published values
--
-- A task's declared outputs (name → pattern; NULL when none), for its worker to check
-- what the action published, and the values it published (written with its success).

ALTER TABLE tasks ADD COLUMN output_patterns jsonb;
ALTER TABLE tasks ADD COLUMN output_values jsonb;
