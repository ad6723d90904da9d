-- summary: a lost node's attempt is run again without spending the task's retries, unless rerun_if_lost = false
--
-- Work that survives a lost node (docs/architecture.md §3, "Task lease"): lost_reruns counts the
-- attempts the reaper ran again after their lease expired, without spending the task's retries
-- (max_attempts rises with it), bounded by MAX_LOST_RERUNS; rerun_if_lost is false for a task
-- declared `rerun_if_lost = false`, which fails instead. Rows written before keep the defaults
-- (0, true). No protocol raise: an older leader reaps a lost task as it always did (as a retry;
-- for a rerun_if_lost = false task with retries left, that runs it again: README, "Lost nodes").

ALTER TABLE tasks ADD COLUMN lost_reruns integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN rerun_if_lost boolean NOT NULL DEFAULT true;
