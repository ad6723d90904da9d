-- schema: 21
-- The SQLite schema that migrations 1 to 21 (./migrations/) leave, as one script: an empty store
-- is created from it, then given the migrations newer than it (docs/architecture.md §11).
-- Written from a migrated store by test/adapters/sqlite-schema-script.test.ts with
-- UPDATE_SCHEMA_GOLDEN=1, which also checks it; never edited by hand.

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
, handling_term INTEGER, handling_losses INTEGER NOT NULL DEFAULT 0) STRICT;

CREATE INDEX processed_events_open ON processed_events (room_id, origin_server_ts, event_id)
  WHERE status IN ('new','handled');

CREATE INDEX processed_events_room ON processed_events (room_id, origin_server_ts, event_id);

CREATE TABLE runs (
  run_id           TEXT PRIMARY KEY,
  room_id          TEXT NOT NULL,
  dag_id           TEXT NOT NULL,
  hash             TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('pending','running','canceling','succeeded','failed','canceled','rejected','expired')),
  description      TEXT,
  max_parallel     INTEGER,
  publisher        TEXT NOT NULL,
  publish_event_id TEXT,
  confirmed_by     TEXT,
  confirm_deadline INTEGER,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  dag              TEXT NOT NULL, definition_id TEXT,
  UNIQUE (room_id, dag_id)
) STRICT;

CREATE TABLE tasks (
  seq              INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id           TEXT NOT NULL REFERENCES runs (run_id),
  task_id          TEXT NOT NULL,
  room_id          TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('blocked','queued','running','canceling','succeeded','failed','timed_out','canceled','skipped')),
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
  error            TEXT, output_bytes INTEGER, output_patterns TEXT, output_values TEXT, gate TEXT, gate_state TEXT, lost_reruns INTEGER NOT NULL DEFAULT 0, rerun_if_lost INTEGER NOT NULL DEFAULT 1, run_when TEXT CHECK (run_when IN ('failed','denied','done')), for_each TEXT, fan_out TEXT, fan_out_limit INTEGER, fan_out_fail_fast INTEGER NOT NULL DEFAULT 0, item TEXT,
  UNIQUE (run_id, task_id)
) STRICT;

CREATE INDEX tasks_claim ON tasks (priority DESC, seq) WHERE status = 'queued';

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
, action_specs TEXT NOT NULL DEFAULT '{}', undecryptable INTEGER NOT NULL DEFAULT 0, release TEXT, protocol INTEGER, undecryptable_reason TEXT, device_signed INTEGER) STRICT;

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

CREATE TABLE room_policies (
  room_id    TEXT PRIMARY KEY,
  policy     TEXT NOT NULL,
  set_by     TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);

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
  updated_at        INTEGER NOT NULL, schedule_state TEXT NOT NULL DEFAULT 'active'
  CHECK (schedule_state IN ('active','paused','deleted')), schedule_state_by TEXT, schedule_state_at INTEGER, schedule_state_reason TEXT, slots_through INTEGER,
  PRIMARY KEY (room_id, dag_id)
) STRICT;

CREATE INDEX definitions_scheduled ON definitions (room_id, dag_id) WHERE schedule_cron IS NOT NULL;

CREATE TABLE "events" (
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

CREATE INDEX events_room_seq ON events (room_id, seq);

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

CREATE INDEX runs_room_created ON runs (room_id, created_at);

CREATE INDEX runs_room_status ON runs (room_id, status, created_at);

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

CREATE INDEX after_firings_upstream ON after_firings (room_id, upstream_run_id);

CREATE INDEX tasks_gates_open ON tasks (room_id, deadline) WHERE status = 'blocked' AND gate_state IS NOT NULL;

CREATE TRIGGER fleet_fence_claim BEFORE UPDATE OF started_at ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;

CREATE TRIGGER fleet_fence_task BEFORE INSERT ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;

CREATE TRIGGER fleet_fence_run BEFORE INSERT ON runs
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;

CREATE TRIGGER fleet_fence_inbox BEFORE INSERT ON processed_events
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;

CREATE TRIGGER fleet_fence_lease_new BEFORE INSERT ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;

CREATE TRIGGER fleet_fence_lease BEFORE UPDATE ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
