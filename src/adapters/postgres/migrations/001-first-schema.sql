-- summary: the first schema: leases, inbox, runs, tasks, nodes, outbox, events

CREATE TABLE room_leases (
  room_id     text PRIMARY KEY,
  holder_node text,
  holder_boot text,
  term        bigint NOT NULL,
  expires_at  bigint NOT NULL
);

CREATE TABLE room_caps (
  room_id text PRIMARY KEY,
  cap     integer NOT NULL CHECK (cap >= 0)
);

CREATE TABLE processed_events (
  event_id         text PRIMARY KEY,
  room_id          text NOT NULL,
  sender           text NOT NULL,
  origin_server_ts bigint NOT NULL,
  content          jsonb NOT NULL,
  seen_by          text NOT NULL,
  status           text NOT NULL CHECK (status IN ('new','handled','replied')),
  received_at      bigint NOT NULL,
  handled_term     bigint,
  handled_at       bigint,
  result           jsonb
);
-- The leader's queue: only rows still to handle, in the order it takes them.
CREATE INDEX processed_events_open ON processed_events (room_id, origin_server_ts, event_id)
  WHERE status IN ('new','handled');
CREATE INDEX processed_events_room ON processed_events (room_id, origin_server_ts, event_id);

CREATE TABLE runs (
  run_id           text PRIMARY KEY,
  -- Insertion order: the tiebreak of runs created at the same instant.
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  room_id          text NOT NULL,
  dag_id           text NOT NULL,
  hash             text NOT NULL,
  status           text NOT NULL CHECK (status IN ('pending','running','canceling','succeeded','failed','canceled','rejected','expired')),
  description      text,
  max_parallel     integer,
  publisher        text NOT NULL,
  publish_event_id text,
  confirmed_by     text,
  confirm_deadline bigint,
  created_at       bigint NOT NULL,
  updated_at       bigint NOT NULL,
  dag              jsonb NOT NULL,
  UNIQUE (room_id, dag_id)
);
CREATE INDEX runs_room_created ON runs (room_id, created_at DESC, seq DESC);
CREATE INDEX runs_room_open ON runs (room_id, status) WHERE status IN ('pending','running','canceling');

CREATE TABLE tasks (
  run_id           text NOT NULL REFERENCES runs (run_id),
  task_id          text NOT NULL,
  room_id          text NOT NULL,
  -- Store-wide insertion order: the FIFO tiebreak after priority.
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  status           text NOT NULL CHECK (status IN ('blocked','queued','running','canceling','succeeded','failed','timed_out','canceled','skipped')),
  version          integer NOT NULL,
  -- The version the current claim produced: the executor's fencing token. running → canceling
  -- raises version but keeps this, so the executor can still renew and report the cancel.
  claim_version    integer,
  attempt          integer NOT NULL,
  max_attempts     integer NOT NULL,
  action           text NOT NULL,
  args             jsonb NOT NULL,
  needs            text[] NOT NULL,
  labels           text[] NOT NULL,
  node_pin         text,
  priority         integer NOT NULL,
  concurrency_key  text,
  timeout_ms       bigint,
  queue_timeout_ms bigint,
  retry_backoff_ms bigint NOT NULL,
  executor_node    text,
  executor_boot    text,
  lease_expires_at bigint,
  not_before       bigint,
  deadline         bigint,
  queued_at        bigint,
  started_at       bigint,
  finished_at      bigint,
  exit_code        integer,
  output           text,
  error            text,
  PRIMARY KEY (run_id, task_id)
);
-- The claim walks this in claim order and touches queued rows only, however many tasks have been
-- claimed or finished (docs/query-plans.md).
CREATE INDEX tasks_claim ON tasks (priority DESC, seq) WHERE status = 'queued';
-- Scheduler and reaper look at the unfinished tasks of one room.
CREATE INDEX tasks_open ON tasks (room_id, status) WHERE status IN ('blocked','queued','running','canceling');
-- No index by executor: it would cost every claim one more index write, and the running tasks a
-- node listing counts are few (bounded by the caps), found through tasks_open.

CREATE TABLE nodes (
  node_id      text PRIMARY KEY,
  boot_id      text NOT NULL,
  labels       text[] NOT NULL,
  capacity     integer NOT NULL,
  actions      text[] NOT NULL,
  room_ids     text[] NOT NULL,
  heartbeat_at bigint NOT NULL,
  started_at   bigint NOT NULL
);

CREATE TABLE outbox (
  seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  txn_id          text NOT NULL UNIQUE,
  room_id         text NOT NULL,
  event_type      text NOT NULL,
  content         jsonb NOT NULL,
  replaces_txn_id text,
  coalesce_key    text,
  status          text NOT NULL CHECK (status IN ('pending','sent','superseded','failed')),
  sent_event_id   text,
  created_at      bigint NOT NULL,
  updated_at      bigint NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  last_error      text
);
CREATE INDEX outbox_pending ON outbox (room_id, seq) WHERE status = 'pending';
CREATE INDEX outbox_coalesce ON outbox (room_id, coalesce_key) WHERE status = 'pending' AND coalesce_key IS NOT NULL;

CREATE TABLE idempotency_keys (
  scope      text NOT NULL,
  key        text NOT NULL,
  result     jsonb NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (scope, key)
);

-- The event log. seq is drawn at the end of each writing statement, so log order follows cause.
-- Writers hold a shared advisory lock on their room's log while they commit and readers take it
-- exclusively, so a reader never sees seq n while a smaller seq of the same room is still in
-- flight (docs/query-plans.md).
CREATE TABLE events (
  room_id text NOT NULL,
  seq     bigint GENERATED ALWAYS AS IDENTITY,
  at      bigint NOT NULL,
  kind    text NOT NULL,
  run_id  text,
  task_id text,
  term    bigint,
  actor   text,
  data    jsonb NOT NULL,
  -- Every read is "one room since seq": one index serves it and is the only one a write updates.
  PRIMARY KEY (room_id, seq)
);
