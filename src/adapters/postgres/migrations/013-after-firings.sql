-- summary: after triggers: one firing per upstream run
--
-- A definition declaring `after` is fired once per upstream run that ended. The key
-- (room, definition, upstream run) is what holds it to once across leaders; a skipped firing
-- keeps its reason. Upstream runs are found by definition and end time.

CREATE TABLE after_firings (
  room_id          text NOT NULL,
  dag_id           text NOT NULL,
  upstream_run_id  text NOT NULL,
  upstream_dag_id  text NOT NULL,
  upstream_status  text NOT NULL,
  run_id           text,
  run_dag_id       text,
  reason           text,
  fired_at         bigint NOT NULL,
  term             bigint NOT NULL,
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (room_id, dag_id, upstream_run_id)
);
CREATE INDEX after_firings_room ON after_firings (room_id, fired_at DESC, seq DESC);
CREATE INDEX runs_definition_ended ON runs (room_id, definition_id, updated_at)
  WHERE status IN ('succeeded','failed','canceled');
