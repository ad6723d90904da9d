-- summary: after triggers: one firing per upstream run
--
-- A definition declaring `after` is fired once per upstream run that ended. The key
-- (room, definition, upstream run) is what holds it to once across leaders; a skipped firing
-- keeps its reason. Upstream runs are found by definition and end time.

CREATE TABLE after_firings (
  room_id          TEXT NOT NULL,
  dag_id           TEXT NOT NULL,
  upstream_run_id  TEXT NOT NULL,
  upstream_dag_id  TEXT NOT NULL,
  upstream_status  TEXT NOT NULL,
  run_id           TEXT,
  run_dag_id       TEXT,
  reason           TEXT,
  fired_at         INTEGER NOT NULL,
  term             INTEGER NOT NULL,
  PRIMARY KEY (room_id, dag_id, upstream_run_id)
) STRICT;
CREATE INDEX after_firings_room ON after_firings (room_id, fired_at);
CREATE INDEX runs_definition_ended ON runs (room_id, definition_id, updated_at)
  WHERE status IN ('succeeded','failed','canceled');
