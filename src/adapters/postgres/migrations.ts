/**
 * The PostgreSQL schema as numbered migrations, applied at open in one transaction under an
 * advisory lock, so concurrent openers apply each version once. Append new versions; never edit a
 * released one. A schema whose recorded version is newer than the last entry here is refused.
 */
import type pg from "pg";
import { SchemaTooNewError, SchemaTooOldError } from "../../ports/errors.js";
import { quoteIdent } from "./sql.js";
import type { Migration } from "../store-common/schema.js";
import { latestVersion, RUN_STATUS_LIST, TASK_STATUS_LIST } from "../store-common/schema.js";

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    summary: "the first schema: leases, inbox, runs, tasks, nodes, outbox, events",
    sql: `
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
  status           text NOT NULL CHECK (status IN ${RUN_STATUS_LIST}),
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
  status           text NOT NULL CHECK (status IN ${TASK_STATUS_LIST}),
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
`,
  },
  {
    // Nodes register what their actions accept, so the leader checks arguments at publish;
    // the room's permissions live in the store so that every node enforces the same ones.
    version: 2,
    summary: "nodes register their actions' argument rules; room permissions in the store",
    sql: `
ALTER TABLE nodes ADD COLUMN action_specs jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE room_policies (
  room_id    text PRIMARY KEY,
  policy     jsonb NOT NULL,
  set_by     text NOT NULL,
  updated_at bigint NOT NULL
);
`,
  },
  {
    // A running task's output tail is written while it runs (dagbot logs --follow); with
    // the bytes written in all, a reader knows which part of a new tail it has not shown yet.
    version: 3,
    summary: "a running task's output tail and its byte count",
    sql: `
ALTER TABLE tasks ADD COLUMN output_bytes bigint;
`,
  },
  {
    // Each node reports how many encrypted events it could not decrypt (`!dag nodes`).
    version: 4,
    summary: "nodes count the encrypted events they could not decrypt",
    sql: `
ALTER TABLE nodes ADD COLUMN undecryptable bigint NOT NULL DEFAULT 0;
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
`,
  },
  {
    // The claim's pick in a function whose plan cannot depend on planner statistics.
    // Taken before a burst of queued tasks, they make the planner read every queued row of the room
    // (a bitmap scan, or tasks_open) and sort them, on every claim; seen in half the claims of a
    // bench round. With sorts, bitmap and sequential scans disabled here, the walk of tasks_claim
    // (already in claim order, stopping at the first fitting rows) is the only plan left.
    // It locks and returns up to p_limit fitting ready rows in claim order, each with `more`: the
    // batch was filled and another fitting ready task is still queued (rows other claimers hold
    // count: they are still queued in this snapshot); false when the batch was not filled. That
    // check is ordered too, so it walks tasks_claim from its head rather than tasks_open, whose
    // (room, 'queued') entries of every task ever queued it would read in heap order. ROWS 1: with
    // the default estimate (1,000 rows) the claim's UPDATE joins its rows to a scan of all tasks.
    version: 7,
    summary: "the claim's pick in a function with a fixed plan",
    sql: `
CREATE FUNCTION claim_pick(p_now bigint, p_rooms text[], p_node text, p_actions text[], p_labels text[],
                           p_limit integer)
  RETURNS TABLE (run_id text, task_id text, more boolean)
  LANGUAGE plpgsql VOLATILE ROWS 1
  SET enable_sort = off SET enable_bitmapscan = off SET enable_seqscan = off
  SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
  runs text[] := '{}';
  ids text[] := '{}';
  seqs bigint[] := '{}';
  left_more boolean := false;
  r record;
BEGIN
  FOR r IN
    SELECT t.run_id, t.task_id, t.seq FROM tasks t
     WHERE t.status = 'queued'
       AND t.room_id = ANY(p_rooms)
       AND (t.not_before IS NULL OR t.not_before <= p_now)
       AND (t.node_pin IS NULL OR t.node_pin = p_node)
       AND t.action = ANY(p_actions)
       AND t.labels <@ p_labels
     ORDER BY t.priority DESC, t.seq
     LIMIT p_limit
     FOR UPDATE OF t SKIP LOCKED
  LOOP
    runs := runs || r.run_id;
    ids := ids || r.task_id;
    seqs := seqs || r.seq;
  END LOOP;
  IF cardinality(seqs) = p_limit THEN
    left_more := EXISTS (
      SELECT 1 FROM tasks t
       WHERE t.status = 'queued'
         AND t.room_id = ANY(p_rooms)
         AND (t.not_before IS NULL OR t.not_before <= p_now)
         AND (t.node_pin IS NULL OR t.node_pin = p_node)
         AND t.action = ANY(p_actions)
         AND t.labels <@ p_labels
         AND t.seq <> ALL(seqs)
       ORDER BY t.priority DESC, t.seq
       LIMIT 1);
  END IF;
  RETURN QUERY SELECT x.run_id, x.task_id, left_more FROM unnest(runs, ids) AS x(run_id, task_id);
END
$fn$;
`,
  },
  {
    // Poison commands (src/domain/inbox-handling.ts): the term of the leader that started
    // handling a new row, and how many leaders started it and lost their lease before finishing.
    version: 8,
    summary: "poison commands: the term that started handling an inbox row, and its losses",
    sql: `
ALTER TABLE processed_events ADD COLUMN handling_term bigint;
ALTER TABLE processed_events ADD COLUMN handling_losses integer NOT NULL DEFAULT 0;
`,
  },
  {
    // Under the two-person rule a room admin's policy change waits here for a second
    // admin's confirmation (or its expiry); applied ones stay as the record of who agreed.
    version: 9,
    summary: "policy changes waiting for a second admin",
    sql: `
CREATE TABLE policy_proposals (
  room_id      text NOT NULL,
  change_id    text NOT NULL,
  change       jsonb NOT NULL,
  proposed_by  text NOT NULL,
  proposed_at  bigint NOT NULL,
  expires_at   bigint NOT NULL,
  status       text NOT NULL CHECK (status IN ('pending', 'applied')),
  confirmed_by text,
  confirmed_at bigint,
  PRIMARY KEY (room_id, change_id)
);
`,
  },
  {
    // A schedule is an object of its own, with a state (active, paused, deleted), who
    // changed it last, when and why, and the newest slot it fired or skipped: a skipped slot is
    // recorded (with an event saying why) so no later leader considers it again.
    version: 10,
    summary: "schedules with a state, an owner and the newest slot considered",
    sql: `
ALTER TABLE definitions ADD COLUMN schedule_state text NOT NULL DEFAULT 'active'
  CHECK (schedule_state IN ('active','paused','deleted'));
ALTER TABLE definitions ADD COLUMN schedule_state_by text;
ALTER TABLE definitions ADD COLUMN schedule_state_at bigint;
ALTER TABLE definitions ADD COLUMN schedule_state_reason text;
ALTER TABLE definitions ADD COLUMN slots_through bigint;
UPDATE definitions SET slots_through = last_slot_at;
`,
  },
  {
    // Run lists are paged newest first by (created_at, seq), filtered by status. The room's
    // list has runs_room_created and a definition's runs_definition; a status filter gets its own, in
    // list order, so a page of e.g. failed runs reads that page, not every run of the room since.
    version: 11,
    summary: "run lists paged by creation time, by status",
    sql: `
CREATE INDEX runs_room_status_created ON runs (room_id, status, created_at DESC, seq DESC);
`,
  },
  {
    // A task's declared outputs (name → pattern; NULL when none), for its worker to check
    // what the action published, and the values it published (written with its success).
    version: 12,
    summary: "tasks' declared outputs and published values",
    sql: `
ALTER TABLE tasks ADD COLUMN output_patterns jsonb;
ALTER TABLE tasks ADD COLUMN output_values jsonb;
`,
  },
  {
    // A definition declaring `after` is fired once per upstream run that ended. The key
    // (room, definition, upstream run) is what holds it to once across leaders; a skipped firing
    // keeps its reason. Upstream runs are found by definition and end time.
    version: 13,
    summary: "after triggers: one firing per upstream run",
    sql: `
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
`,
  },
  {
    // Retention deletes a pruned upstream run's firings by the run.
    version: 14,
    summary: "after firings found by upstream run",
    sql: `
CREATE INDEX after_firings_upstream ON after_firings (room_id, upstream_run_id);
`,
  },
  {
    // An approval gate is a task that runs nothing. gate: its spec (null for an action);
    // gate_state: set when it opens (approvals, form values, decision). Its timeout is the row's
    // deadline while it is open; tasks_gates_open finds the open ones for the reaper.
    version: 15,
    summary: "approval gates",
    sql: `
ALTER TABLE tasks ADD COLUMN gate jsonb;
ALTER TABLE tasks ADD COLUMN gate_state jsonb;
CREATE INDEX tasks_gates_open ON tasks (room_id, deadline) WHERE status = 'blocked' AND gate_state IS NOT NULL;
`,
  },
  {
    // The rows of a batch of finishes (tasks.ts, FINISH_MANY_SQL), unnested from the
    // statement's parameter arrays. A function with a small row estimate, not a bare unnest: the
    // planner guesses 100 rows for an unnest of parameters, so it costed the statement's generic
    // plan above its custom one and planned it afresh at every execution (1.5–2 ms each); with
    // the estimate the generic plan (index lookups by primary key) is kept.
    version: 16,
    summary: "batched finishes: the rows of a batch from a function with a small row estimate",
    sql: `
CREATE FUNCTION finish_rows(p_runs text[], p_tasks text[], p_versions integer[], p_nodes text[], p_boots text[],
                            p_outcomes text[], p_exits integer[], p_outputs text[], p_errors text[],
                            p_actors text[], p_bytes bigint[], p_values jsonb[], p_wants integer[])
  RETURNS TABLE (b_run text, b_task text, b_version integer, b_node text, b_boot text, b_outcome text,
                 b_exit integer, b_output text, b_error text, b_actor text, b_bytes bigint, b_values jsonb,
                 b_wants integer, b_i bigint)
  LANGUAGE plpgsql IMMUTABLE ROWS 8
AS $fn$
BEGIN
  RETURN QUERY SELECT * FROM unnest(p_runs, p_tasks, p_versions, p_nodes, p_boots, p_outcomes, p_exits,
                                    p_outputs, p_errors, p_actors, p_bytes, p_values, p_wants) WITH ORDINALITY;
END
$fn$;
`,
  },
  {
    // Upgrade day (docs/architecture.md §11): nodes say which release and fleet protocol they run,
    // and the store refuses what a node of protocol 1 (before 0.2.0) would do wrong beside this
    // schema: a claim (it would run a gate as an action, or a task without checking its outputs),
    // a lease (it would lead and queue gates as tasks), a new run, task or inbox row. Its renewals,
    // output writes and finishes still pass, so what it runs ends once. A connection is of protocol
    // 2 when it set dagbot.protocol = 2 (db.ts, clientConfig); an older one did not and reads this
    // message from its failed statement. Statement triggers: one check a statement, none a row.
    // The leases are handed back, with a new term, so an old leader's next fenced write fails and
    // a protocol-2 node takes over.
    version: 17,
    summary:
      "nodes record release and protocol; the store refuses claims, leases and new runs of nodes before 0.2.0",
    fleetProtocol: 2,
    sql: `
ALTER TABLE nodes ADD COLUMN release text;
ALTER TABLE nodes ADD COLUMN protocol integer;
UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = 0, term = term + 1;
CREATE FUNCTION fleet_fence_refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)';
END
$fn$;
CREATE TRIGGER fleet_fence_claim BEFORE UPDATE OF started_at ON tasks FOR EACH STATEMENT
  WHEN (current_setting('dagbot.protocol', true) IS DISTINCT FROM '2') EXECUTE FUNCTION fleet_fence_refuse();
CREATE TRIGGER fleet_fence_task BEFORE INSERT ON tasks FOR EACH STATEMENT
  WHEN (current_setting('dagbot.protocol', true) IS DISTINCT FROM '2') EXECUTE FUNCTION fleet_fence_refuse();
CREATE TRIGGER fleet_fence_run BEFORE INSERT ON runs FOR EACH STATEMENT
  WHEN (current_setting('dagbot.protocol', true) IS DISTINCT FROM '2') EXECUTE FUNCTION fleet_fence_refuse();
CREATE TRIGGER fleet_fence_inbox BEFORE INSERT ON processed_events FOR EACH STATEMENT
  WHEN (current_setting('dagbot.protocol', true) IS DISTINCT FROM '2') EXECUTE FUNCTION fleet_fence_refuse();
CREATE TRIGGER fleet_fence_lease BEFORE INSERT OR UPDATE ON room_leases FOR EACH STATEMENT
  WHEN (current_setting('dagbot.protocol', true) IS DISTINCT FROM '2') EXECUTE FUNCTION fleet_fence_refuse();
`,
  },
  {
    // Each node reports why its last undecryptable event was not decrypted and whether its device
    // is cross-signed (docs/architecture.md §12), for `!dag nodes`. Nullable: a node of an older
    // schema's release writes neither.
    version: 18,
    summary: "nodes record their last decryption failure's reason and whether their device is cross-signed",
    sql: `
ALTER TABLE nodes ADD COLUMN undecryptable_reason text;
ALTER TABLE nodes ADD COLUMN device_signed boolean;
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
ALTER TABLE tasks ADD COLUMN lost_reruns integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN rerun_if_lost boolean NOT NULL DEFAULT true;
`,
  },
];

export const LATEST_SCHEMA_VERSION = latestVersion(MIGRATIONS);

/**
 * Bring the schema to LATEST_SCHEMA_VERSION inside one transaction. The advisory lock (keyed by
 * schema) makes a second opener wait and then find the work done; a failing migration leaves the
 * schema as it was.
 */
export async function migrate(
  client: pg.PoolClient,
  schema: string,
  allowUpgrade = true,
): Promise<{ from: number; to: number }> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('dagbot.migrate'), hashtext($1))", [schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.schema_version (
         version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${quoteIdent(schema)}.schema_version`,
    );
    const from = rows[0]?.v ?? 0;
    if (from > LATEST_SCHEMA_VERSION) throw new SchemaTooNewError(from, LATEST_SCHEMA_VERSION);
    if (from > 0 && from < LATEST_SCHEMA_VERSION && !allowUpgrade)
      throw new SchemaTooOldError(from, LATEST_SCHEMA_VERSION);
    if (from === LATEST_SCHEMA_VERSION) {
      await client.query("ROLLBACK");
      return { from, to: from };
    }
    await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
    for (const m of MIGRATIONS) {
      if (m.version <= from) continue;
      await client.query(m.sql);
      await client.query("INSERT INTO schema_version (version) VALUES ($1)", [m.version]);
    }
    await client.query("COMMIT");
    return { from, to: LATEST_SCHEMA_VERSION };
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  }
}
