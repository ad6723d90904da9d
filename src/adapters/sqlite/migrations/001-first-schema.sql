-- summary: the first schema: leases, inbox, runs, tasks, nodes, outbox, events

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
  status           TEXT NOT NULL CHECK (status IN ('pending','running','canceling','succeeded','failed','canceled','rejected','expired')),
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
