-- summary: after firings found by upstream run
--
-- Retention deletes a pruned upstream run's firings by the run.

CREATE INDEX after_firings_upstream ON after_firings (room_id, upstream_run_id);
