-- summary: fan-out (for_each): a template's spec, its instances' group, limit, fail_fast and item
--
-- Fan-out (docs/architecture.md §6, "Fan-out", docs/architecture.md §4): for_each holds a template's
-- spec (JSON: producer, output, maxParallel, failFast); the template never runs: the leader's
-- scheduling step replaces it, in one fenced write, by one instance per item of the producer's
-- list. An instance keeps its fan-out's id (fan_out), the limit on its active instances
-- (fan_out_limit, NULL: none), fail_fast (0/1) and its item. Rows written before keep NULLs and 0.
-- No protocol raise here: the fleet protocol is raised where this release's other 020 migration
-- raises it (an older leader would queue a template as a task).

ALTER TABLE tasks ADD COLUMN for_each TEXT;
ALTER TABLE tasks ADD COLUMN fan_out TEXT;
ALTER TABLE tasks ADD COLUMN fan_out_limit INTEGER;
ALTER TABLE tasks ADD COLUMN fan_out_fail_fast INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN item TEXT;
