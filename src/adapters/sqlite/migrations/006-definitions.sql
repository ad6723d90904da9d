-- summary: published DAGs get a table of their own (definitions), back-filled from the runs
--
-- Published DAGs get their own table, keyed by (room, dag id), so a definition's runs,
-- its schedule and its newest slot are indexed lookups instead of a scan of the newest runs.
-- Back-filled from the runs: a run without "definition" in its DAG is a definition's first run;
-- runs of a definition whose first run was already pruned rebuild it from their oldest, with an
-- empty hash (content unknown: the next publish of that id adopts it).

ALTER TABLE runs ADD COLUMN definition_id TEXT;
UPDATE runs SET definition_id = COALESCE(json_extract(dag, '$.definition'), dag_id);
CREATE INDEX runs_definition ON runs (room_id, definition_id, created_at);

CREATE TABLE definitions (
  room_id           TEXT NOT NULL,
  dag_id            TEXT NOT NULL,
  hash              TEXT NOT NULL,
  dag               TEXT NOT NULL,
  schedule_cron     TEXT,
  schedule_timezone TEXT,
  schedule_missed   TEXT CHECK (schedule_missed IN ('skip','run_once')),
  publisher         TEXT NOT NULL,
  -- The run publishing created: its approval is the definition's. NULL once it is gone.
  first_run_id      TEXT,
  last_slot_at      INTEGER,
  last_run_number   INTEGER NOT NULL DEFAULT 1,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  PRIMARY KEY (room_id, dag_id)
) STRICT;
CREATE INDEX definitions_scheduled ON definitions (room_id, dag_id) WHERE schedule_cron IS NOT NULL;

INSERT INTO definitions (room_id, dag_id, hash, dag, schedule_cron, schedule_timezone, schedule_missed,
                         publisher, first_run_id, created_at, updated_at)
SELECT room_id, dag_id, hash, json_remove(dag, '$.values'), json_extract(dag, '$.schedule.cron'),
       json_extract(dag, '$.schedule.timezone'), json_extract(dag, '$.schedule.missed'), publisher, run_id,
       created_at, updated_at
  FROM runs WHERE json_extract(dag, '$.definition') IS NULL;

INSERT INTO definitions (room_id, dag_id, hash, dag, publisher, created_at, updated_at)
SELECT room_id, definition_id, '',
       json_set(json_remove(dag, '$.values', '$.definition', '$.slot'), '$.id', definition_id),
       publisher, MIN(created_at), created_at
  FROM runs r
 WHERE json_extract(dag, '$.definition') IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM definitions d WHERE d.room_id = r.room_id AND d.dag_id = r.definition_id)
 GROUP BY room_id, definition_id;

UPDATE definitions SET
  last_slot_at = (SELECT MAX(json_extract(r.dag, '$.slot.at')) FROM runs r
                   WHERE r.room_id = definitions.room_id AND r.definition_id = definitions.dag_id),
  last_run_number = MAX(1, COALESCE((
    SELECT MAX(MIN(CAST(substr(r.dag_id, length(rtrim(r.dag_id, '0123456789')) + 1) AS INTEGER), 1000000))
      FROM runs r
     WHERE r.room_id = definitions.room_id AND r.definition_id = definitions.dag_id AND r.dag_id <> definitions.dag_id
       AND rtrim(r.dag_id, '0123456789') <> r.dag_id
       AND substr(r.dag_id, length(rtrim(r.dag_id, '0123456789')), 1) = '.'), 1));
