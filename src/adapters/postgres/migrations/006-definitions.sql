-- summary: published DAGs get a table of their own (definitions), back-filled from the runs
--
-- Published DAGs get their own table, keyed by (room, dag id), so a definition's runs,
-- its schedule and its newest slot are indexed lookups instead of a scan of the newest runs.
-- Back-filled from the runs: a run without "definition" in its DAG is a definition's first run;
-- runs of a definition whose first run was already pruned rebuild it from their oldest, with an
-- empty hash (content unknown: the next publish of that id adopts it).

ALTER TABLE runs ADD COLUMN definition_id text;
UPDATE runs SET definition_id = COALESCE(dag->>'definition', dag_id);
CREATE INDEX runs_definition ON runs (room_id, definition_id, created_at DESC, seq DESC);

CREATE TABLE definitions (
  room_id           text NOT NULL,
  dag_id            text NOT NULL,
  hash              text NOT NULL,
  dag               jsonb NOT NULL,
  schedule_cron     text,
  schedule_timezone text,
  schedule_missed   text CHECK (schedule_missed IN ('skip','run_once')),
  publisher         text NOT NULL,
  -- The run publishing created: its approval is the definition's. NULL once it is gone.
  first_run_id      text,
  last_slot_at      bigint,
  last_run_number   integer NOT NULL DEFAULT 1,
  created_at        bigint NOT NULL,
  updated_at        bigint NOT NULL,
  PRIMARY KEY (room_id, dag_id)
);
CREATE INDEX definitions_scheduled ON definitions (room_id, dag_id) WHERE schedule_cron IS NOT NULL;

INSERT INTO definitions (room_id, dag_id, hash, dag, schedule_cron, schedule_timezone, schedule_missed,
                         publisher, first_run_id, created_at, updated_at)
SELECT room_id, dag_id, hash, dag - 'values', dag->'schedule'->>'cron', dag->'schedule'->>'timezone',
       dag->'schedule'->>'missed', publisher, run_id, created_at, updated_at
  FROM runs WHERE dag->'definition' IS NULL;

INSERT INTO definitions (room_id, dag_id, hash, dag, publisher, created_at, updated_at)
SELECT DISTINCT ON (room_id, definition_id) room_id, definition_id, '',
       jsonb_set(dag - 'values' - 'definition' - 'slot', '{id}', to_jsonb(definition_id)),
       publisher, created_at, created_at
  FROM runs r
 WHERE dag->'definition' IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM definitions d WHERE d.room_id = r.room_id AND d.dag_id = r.definition_id)
 ORDER BY room_id, definition_id, created_at, seq;

UPDATE definitions d SET
  last_slot_at = (SELECT max((r.dag->'slot'->>'at')::bigint) FROM runs r
                   WHERE r.room_id = d.room_id AND r.definition_id = d.dag_id),
  last_run_number = GREATEST(1, COALESCE((
    SELECT max(LEAST(substring(r.dag_id from '[.]([0-9]+)$')::numeric, 1000000))::integer FROM runs r
     WHERE r.room_id = d.room_id AND r.definition_id = d.dag_id AND r.dag_id <> d.dag_id
       AND r.dag_id ~ '[.][0-9]+$'), 1));
