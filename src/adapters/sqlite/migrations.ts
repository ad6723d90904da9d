/**
 * The SQLite schema as numbered migrations, applied at open inside one BEGIN IMMEDIATE transaction.
 * Append new versions; never edit a released one. A database whose recorded version is newer than
 * the last entry here was written by a newer dagbot and is refused.
 */
import type Database from "better-sqlite3";
import { SchemaTooNewError, SchemaTooOldError } from "../../ports/errors.js";
import type { Migration } from "../store-common/schema.js";
import { latestVersion, RUN_STATUS_LIST, TASK_STATUS_LIST } from "../store-common/schema.js";

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    summary: "the first schema: leases, inbox, runs, tasks, nodes, outbox, events",
    sql: `
CREATE TABLE room_leases (
  room_id     TEXT PRIMARY KEY,
  holder_node TEXT,
  holder_boot TEXT,
  term        INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE room_caps (
  room_id TEXT PRIMARY KEY,
  cap     INTEGER NOT NULL CHECK (cap >= 0)
) STRICT;

CREATE TABLE processed_events (
  event_id         TEXT PRIMARY KEY,
  room_id          TEXT NOT NULL,
  sender           TEXT NOT NULL,
  origin_server_ts INTEGER NOT NULL,
  content          TEXT NOT NULL,
  seen_by          TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('new','handled','replied')),
  received_at      INTEGER NOT NULL,
  handled_term     INTEGER,
  handled_at       INTEGER,
  result           TEXT
) STRICT;
-- The leader's queue: only rows still to handle, in the order it takes them.
CREATE INDEX processed_events_open ON processed_events (room_id, origin_server_ts, event_id)
  WHERE status IN ('new','handled');
CREATE INDEX processed_events_room ON processed_events (room_id, origin_server_ts, event_id);

CREATE TABLE runs (
  run_id           TEXT PRIMARY KEY,
  room_id          TEXT NOT NULL,
  dag_id           TEXT NOT NULL,
  hash             TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ${RUN_STATUS_LIST}),
  description      TEXT,
  max_parallel     INTEGER,
  publisher        TEXT NOT NULL,
  publish_event_id TEXT,
  confirmed_by     TEXT,
  confirm_deadline INTEGER,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  dag              TEXT NOT NULL,
  UNIQUE (room_id, dag_id)
) STRICT;
CREATE INDEX runs_room_status ON runs (room_id, status);

-- seq is the rowid: the store-wide insertion order, the FIFO tiebreak after priority.
CREATE TABLE tasks (
  seq              INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id           TEXT NOT NULL REFERENCES runs (run_id),
  task_id          TEXT NOT NULL,
  room_id          TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ${TASK_STATUS_LIST}),
  version          INTEGER NOT NULL,
  -- The version the current claim produced: the executor's fencing token. running → canceling
  -- raises version but keeps this, so the executor can still renew and report the cancel.
  claim_version    INTEGER,
  attempt          INTEGER NOT NULL,
  max_attempts     INTEGER NOT NULL,
  action           TEXT NOT NULL,
  args             TEXT NOT NULL,
  needs            TEXT NOT NULL,
  labels           TEXT NOT NULL,
  node_pin         TEXT,
  priority         INTEGER NOT NULL,
  concurrency_key  TEXT,
  timeout_ms       INTEGER,
  queue_timeout_ms INTEGER,
  retry_backoff_ms INTEGER NOT NULL,
  executor_node    TEXT,
  executor_boot    TEXT,
  lease_expires_at INTEGER,
  not_before       INTEGER,
  deadline         INTEGER,
  queued_at        INTEGER,
  started_at       INTEGER,
  finished_at      INTEGER,
  exit_code        INTEGER,
  output           TEXT,
  error            TEXT,
  UNIQUE (run_id, task_id)
) STRICT;
-- The claim query walks this in claim order and touches queued rows only, however many tasks
-- have been claimed or finished (docs/query-plans.md).
CREATE INDEX tasks_claim ON tasks (priority DESC, seq) WHERE status = 'queued';
-- Scheduler and reaper look at the unfinished tasks of one room.
CREATE INDEX tasks_open ON tasks (room_id, status)
  WHERE status IN ('blocked','queued','running','canceling');
CREATE INDEX tasks_executor ON tasks (executor_node, executor_boot)
  WHERE status IN ('running','canceling');

CREATE TABLE nodes (
  node_id      TEXT PRIMARY KEY,
  boot_id      TEXT NOT NULL,
  labels       TEXT NOT NULL,
  capacity     INTEGER NOT NULL,
  actions      TEXT NOT NULL,
  room_ids     TEXT NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  started_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE outbox (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
  txn_id          TEXT NOT NULL UNIQUE,
  room_id         TEXT NOT NULL,
  event_type      TEXT NOT NULL,
  content         TEXT NOT NULL,
  replaces_txn_id TEXT,
  coalesce_key    TEXT,
  status          TEXT NOT NULL CHECK (status IN ('pending','sent','superseded','failed')),
  sent_event_id   TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_error      TEXT
) STRICT;
CREATE INDEX outbox_pending ON outbox (room_id, seq) WHERE status = 'pending';
CREATE INDEX outbox_coalesce ON outbox (room_id, coalesce_key)
  WHERE status = 'pending' AND coalesce_key IS NOT NULL;

CREATE TABLE idempotency_keys (
  scope      TEXT NOT NULL,
  key        TEXT NOT NULL,
  result     TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
) STRICT;

CREATE TABLE events (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  room_id TEXT NOT NULL,
  at      INTEGER NOT NULL,
  kind    TEXT NOT NULL,
  run_id  TEXT,
  task_id TEXT,
  term    INTEGER,
  actor   TEXT,
  data    TEXT NOT NULL
) STRICT;
CREATE INDEX events_room_seq ON events (room_id, seq);
`,
  },
  {
    // Nodes register what their actions accept, so the leader checks arguments at publish;
    // the room's permissions live in the store so that every node enforces the same ones.
    version: 2,
    summary: "nodes register their actions' argument rules; room permissions in the store",
    sql: `
ALTER TABLE nodes ADD COLUMN action_specs TEXT NOT NULL DEFAULT '{}';

CREATE TABLE room_policies (
  room_id    TEXT PRIMARY KEY,
  policy     TEXT NOT NULL,
  set_by     TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
`,
  },
  {
    // A running task's output tail is written while it runs (dagbot logs --follow); with
    // the bytes written in all, a reader knows which part of a new tail it has not shown yet.
    version: 3,
    summary: "a running task's output tail and its byte count",
    sql: `
ALTER TABLE tasks ADD COLUMN output_bytes INTEGER;
`,
  },
  {
    // Each node reports how many encrypted events it could not decrypt (`!dag nodes`).
    version: 4,
    summary: "nodes count the encrypted events they could not decrypt",
    sql: `
ALTER TABLE nodes ADD COLUMN undecryptable INTEGER NOT NULL DEFAULT 0;
`,
  },
  {
    // Idempotency keys are forgotten after retention.idempotency_keys; the oldest are found first.
    version: 5,
    summary: "idempotency keys are found by age for retention",
    sql: `
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
`,
  },
  {
    // Published DAGs get their own table, keyed by (room, dag id), so a definition's runs,
    // its schedule and its newest slot are indexed lookups instead of a scan of the newest runs.
    // Back-filled from the runs: a run without "definition" in its DAG is a definition's first run;
    // runs of a definition whose first run was already pruned rebuild it from their oldest, with an
    // empty hash (content unknown: the next publish of that id adopts it).
    version: 6,
    summary: "published DAGs get a table of their own (definitions), back-filled from the runs",
    sql: `
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
`,
  },
  {
    // Events without AUTOINCREMENT. Every event line also rewrote its sqlite_sequence row,
    // a page of WAL per commit on the claim path. A plain INTEGER PRIMARY KEY takes the largest seq
    // + 1, which never goes back while the largest row stays: retention keeps the newest event, and
    // a seq handed out before whose row is gone is kept by a mark (no room, so no reader sees it).
    version: 7,
    summary: "the event log without AUTOINCREMENT",
    sql: `
CREATE TABLE events_next (
  seq     INTEGER PRIMARY KEY,
  room_id TEXT NOT NULL,
  at      INTEGER NOT NULL,
  kind    TEXT NOT NULL,
  run_id  TEXT,
  task_id TEXT,
  term    INTEGER,
  actor   TEXT,
  data    TEXT NOT NULL
) STRICT;
INSERT INTO events_next (seq, room_id, at, kind, run_id, task_id, term, actor, data)
  SELECT seq, room_id, at, kind, run_id, task_id, term, actor, data FROM events;
INSERT INTO events_next (seq, room_id, at, kind, data)
  SELECT seq, '', 0, 'store.seq_mark', '{}' FROM sqlite_sequence
   WHERE name = 'events' AND seq > (SELECT COALESCE(MAX(seq), 0) FROM events);
DROP TABLE events;
ALTER TABLE events_next RENAME TO events;
CREATE INDEX events_room_seq ON events (room_id, seq);
`,
  },
  {
    // `tasks_open` goes. No query could use it: SQLite takes a partial index only when the
    // query's WHERE implies the index's, and none of the open-task reads names its exact status list
    // (INDEXED BY tasks_open fails to plan for each of them). Yet every claim wrote two of its pages
    // (out of the queued entries, into the running ones) and every finish one: three WAL pages per
    // claim+finish pair for nothing. The reads use tasks_claim (queued) and tasks_executor (running).
    version: 8,
    summary: "drops an index no query used (tasks_open)",
    sql: `
DROP INDEX tasks_open;
`,
  },
  {
    // Poison commands (src/domain/inbox-handling.ts): the term of the leader that started
    // handling a new row, and how many leaders started it and lost their lease before finishing.
    version: 9,
    summary: "poison commands: the term that started handling an inbox row, and its losses",
    sql: `
ALTER TABLE processed_events ADD COLUMN handling_term INTEGER;
ALTER TABLE processed_events ADD COLUMN handling_losses INTEGER NOT NULL DEFAULT 0;
`,
  },
  {
    // Under the two-person rule a room admin's policy change waits here for a second
    // admin's confirmation (or its expiry); applied ones stay as the record of who agreed.
    version: 10,
    summary: "policy changes waiting for a second admin",
    sql: `
CREATE TABLE policy_proposals (
  room_id      TEXT NOT NULL,
  change_id    TEXT NOT NULL,
  change       TEXT NOT NULL,
  proposed_by  TEXT NOT NULL,
  proposed_at  INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('pending', 'applied')),
  confirmed_by TEXT,
  confirmed_at INTEGER,
  PRIMARY KEY (room_id, change_id)
) STRICT;
`,
  },
  {
    // A schedule is an object of its own, with a state (active, paused, deleted), who
    // changed it last, when and why, and the newest slot it fired or skipped: a skipped slot is
    // recorded (with an event saying why) so no later leader considers it again.
    version: 11,
    summary: "schedules with a state, an owner and the newest slot considered",
    sql: `
ALTER TABLE definitions ADD COLUMN schedule_state TEXT NOT NULL DEFAULT 'active'
  CHECK (schedule_state IN ('active','paused','deleted'));
ALTER TABLE definitions ADD COLUMN schedule_state_by TEXT;
ALTER TABLE definitions ADD COLUMN schedule_state_at INTEGER;
ALTER TABLE definitions ADD COLUMN schedule_state_reason TEXT;
ALTER TABLE definitions ADD COLUMN slots_through INTEGER;
UPDATE definitions SET slots_through = last_slot_at;
`,
  },
  {
    // Run lists are paged newest first by (created_at, rowid), by room, status or
    // definition (runs_definition). An index entry ends with the rowid, so each of these is in list
    // order and a page reads its own rows. The status index replaces (room_id, status), a prefix of it.
    version: 12,
    summary: "run lists paged by creation time",
    sql: `
CREATE INDEX runs_room_created ON runs (room_id, created_at);
DROP INDEX runs_room_status;
CREATE INDEX runs_room_status ON runs (room_id, status, created_at);
`,
  },
  {
    // A task's declared outputs (name → pattern, JSON; NULL when none), for its worker to
    // check what the action published, and the values it published (JSON; written with its success).
    version: 13,
    summary: "tasks' declared outputs and published values",
    sql: `
ALTER TABLE tasks ADD COLUMN output_patterns TEXT;
ALTER TABLE tasks ADD COLUMN output_values TEXT;
`,
  },
  {
    // A definition declaring `after` is fired once per upstream run that ended. The key
    // (room, definition, upstream run) is what holds it to once across leaders; a skipped firing
    // keeps its reason. Upstream runs are found by definition and end time.
    version: 14,
    summary: "after triggers: one firing per upstream run",
    sql: `
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
`,
  },
  {
    // Retention deletes a pruned upstream run's firings by the run.
    version: 15,
    summary: "after firings found by upstream run",
    sql: `
CREATE INDEX after_firings_upstream ON after_firings (room_id, upstream_run_id);
`,
  },
  {
    // An approval gate is a task that runs nothing. gate: its spec as JSON (null for an
    // action); gate_state: set when it opens (approvals, form values, decision). Its timeout is the
    // row's deadline while it is open; tasks_gates_open finds the open ones for the reaper.
    version: 16,
    summary: "approval gates",
    sql: `
ALTER TABLE tasks ADD COLUMN gate TEXT;
ALTER TABLE tasks ADD COLUMN gate_state TEXT;
CREATE INDEX tasks_gates_open ON tasks (room_id, deadline) WHERE status = 'blocked' AND gate_state IS NOT NULL;
`,
  },
  {
    // Upgrade day (docs/architecture.md §11): nodes say which release and fleet protocol they run,
    // and the store refuses what a node of protocol 1 (before 0.2.0) would do wrong beside this
    // schema: a claim (it would run a gate as an action, or a task without checking its outputs),
    // a lease (it would lead and queue gates as tasks), a new run, task or inbox row. Its renewals,
    // output writes and finishes still pass, so what it runs ends once. A connection is of protocol
    // 2 when it made the temp view dagbot_fleet_protocol_2 (connection.ts); an older one has none
    // and reads this message from its failed statement. The leases are handed back, with a new
    // term, so an old leader's next fenced write fails and a protocol-2 node takes over.
    version: 17,
    summary:
      "nodes record release and protocol; the store refuses claims, leases and new runs of nodes before 0.2.0",
    fleetProtocol: 2,
    sql: `
ALTER TABLE nodes ADD COLUMN release TEXT;
ALTER TABLE nodes ADD COLUMN protocol INTEGER;
UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = 0, term = term + 1;
CREATE TRIGGER fleet_fence_claim BEFORE UPDATE OF started_at ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_task BEFORE INSERT ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_run BEFORE INSERT ON runs
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_inbox BEFORE INSERT ON processed_events
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease_new BEFORE INSERT ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease BEFORE UPDATE ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
`,
  },
  {
    // Each node reports why its last undecryptable event was not decrypted and whether its device
    // is cross-signed (docs/architecture.md §12), for `!dag nodes`. Nullable: a node of an older
    // schema's release writes neither.
    version: 18,
    summary: "nodes record their last decryption failure's reason and whether their device is cross-signed",
    sql: `
ALTER TABLE nodes ADD COLUMN undecryptable_reason TEXT;
ALTER TABLE nodes ADD COLUMN device_signed INTEGER;
`,
  },
  {
    // Work that survives a lost node (docs/architecture.md §3, "Task lease"): lost_reruns counts the
    // attempts the reaper ran again after their lease expired, without spending the task's retries
    // (max_attempts rises with it), bounded by MAX_LOST_RERUNS; rerun_if_lost is false for a task
    // declared `rerun_if_lost = false`, which fails instead. Rows written before keep the defaults
    // (0, true). No protocol raise: an older leader reaps a lost task as it always did (as a retry;
    // for a rerun_if_lost = false task with retries left, that runs it again: README, "Lost nodes").
    version: 19,
    summary:
      "a lost node's attempt is run again without spending the task's retries, unless rerun_if_lost = false",
    sql: `
ALTER TABLE tasks ADD COLUMN lost_reruns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN rerun_if_lost INTEGER NOT NULL DEFAULT 1;
`,
  },
];

export const LATEST_SCHEMA_VERSION = latestVersion(MIGRATIONS);

/** The recorded version, 0 for an empty database. */
export function currentSchemaVersion(db: Database.Database): number {
  const exists = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    .get();
  if (exists === undefined) return 0;
  const row = db.prepare("SELECT MAX(version) AS v FROM schema_version").get() as { v: number | null };
  return row.v ?? 0;
}

/**
 * Whether a store at `found` may be opened by this release: a newer schema never, an older one only
 * when the caller may migrate (`migrate`); an empty one (0) always. Checked before anything is
 * written, so a refused store is left byte for byte as it was.
 */
export function checkSchemaVersion(found: number, migrate: boolean): void {
  if (found > LATEST_SCHEMA_VERSION) throw new SchemaTooNewError(found, LATEST_SCHEMA_VERSION);
  if (found > 0 && found < LATEST_SCHEMA_VERSION && !migrate)
    throw new SchemaTooOldError(found, LATEST_SCHEMA_VERSION);
}

/**
 * Bring the schema to LATEST_SCHEMA_VERSION. Runs inside the caller's write transaction, so
 * several processes opening one new file at once apply each migration exactly once.
 */
export function migrate(
  db: Database.Database,
  now: number,
  allowUpgrade = true,
): { from: number; to: number } {
  checkSchemaVersion(currentSchemaVersion(db), allowUpgrade);
  db.exec(
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT",
  );
  const from = currentSchemaVersion(db);
  const record = db.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)");
  for (const m of MIGRATIONS) {
    if (m.version <= from) continue;
    db.exec(m.sql);
    record.run(m.version, now);
  }
  return { from, to: LATEST_SCHEMA_VERSION };
}
