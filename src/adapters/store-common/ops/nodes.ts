/**
 * Nodes, idempotency keys and the event log's reads, written once for both stores: the small tables
 * around the state machines (docs/architecture.md §9, "Stores").
 */
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type { LogEvent, NodeHeartbeat, NodeRecord, Session } from "../../../ports/store.js";
import { LOG_LOCK } from "../postgres-text.js";
import { checkCapacity } from "../checks.js";
import type { Script } from "../script.js";
import { mappers, p, row, rows, run, sql } from "../script.js";

// Not in the event log: heartbeats are liveness, not state, and belong to no single room. One
// statement for many nodes (a core writes its edges' beats in batches, docs/operations.md "Edge
// nodes"); `WHERE true` keeps SQLite from reading ON CONFLICT as a join's ON.
const HEARTBEATS = sql("nodes' heartbeats")`
  INSERT INTO nodes AS n (node_id, boot_id, labels, capacity, actions, room_ids, heartbeat_at, started_at,
                          action_specs, undecryptable, undecryptable_reason, device_signed, release, protocol)
  SELECT b.node, b.boot, b.labels, b.capacity, b.actions, b.rooms, ${p.now}, ${p.now}, b.specs, b.undecryptable,
         b.reason, b.signed, b.rel, b.proto
    FROM ${p.table("beats", "b", {
      node: "text",
      boot: "text",
      labels: "textList",
      capacity: "int",
      actions: "textList",
      rooms: "textList",
      specs: "json",
      undecryptable: "int",
      reason: "text",
      signed: "bool",
      rel: "text",
      proto: "int",
    })}
   WHERE true
  ON CONFLICT (node_id) DO UPDATE SET
    boot_id = excluded.boot_id, labels = excluded.labels, capacity = excluded.capacity,
    actions = excluded.actions, room_ids = excluded.room_ids, heartbeat_at = excluded.heartbeat_at,
    action_specs = excluded.action_specs, undecryptable = excluded.undecryptable,
    undecryptable_reason = excluded.undecryptable_reason, device_signed = excluded.device_signed,
    release = excluded.release, protocol = excluded.protocol,
    started_at = CASE WHEN n.boot_id = excluded.boot_id THEN n.started_at ELSE excluded.started_at END`;

// Running tasks counted in one pass over the open tasks, not once per node.
const NODES = sql("the nodes")`
  SELECT n.node_id, n.boot_id, n.labels, n.capacity, n.actions, n.room_ids, n.heartbeat_at, n.started_at,
         n.action_specs, n.undecryptable, n.undecryptable_reason, n.device_signed, n.release, n.protocol,
         ${p.now} - n.heartbeat_at AS age_ms, coalesce(r.n, 0) AS running_tasks
    FROM nodes n
    LEFT JOIN (SELECT executor_node, executor_boot, count(*) AS n FROM tasks
                WHERE status IN ('running','canceling') GROUP BY executor_node, executor_boot) r
           ON r.executor_node = n.node_id AND r.executor_boot = n.boot_id
   ORDER BY n.node_id`;

const REMOVE = sql("a node removed")`
  DELETE FROM nodes WHERE node_id = ${p.text("node")} AND boot_id = ${p.text("boot")}`;

const NODE_BOOT = sql("a node's boot")`SELECT boot_id FROM nodes WHERE node_id = ${p.text("node")}`;

// ON CONFLICT waits for a racing inserter to commit; its row is then read by the next statement,
// whose fresh snapshot (PostgreSQL, outside a transaction) sees it.
const REMEMBER = sql("an idempotency key remembered")`
  INSERT INTO idempotency_keys (scope, key, result, created_at)
  VALUES (${p.text("scope")}, ${p.text("key")}, ${p.json("result")}, ${p.now}) ON CONFLICT DO NOTHING`;

const KEY = sql("an idempotency key")`
  SELECT result FROM idempotency_keys WHERE scope = ${p.text("scope")} AND key = ${p.text("key")}`;

/**
 * PostgreSQL: the room's log lock, exclusive. It waits out every writer of the room that may hold a
 * seq it has not committed yet; the read after it then sees the complete prefix. SQLite's read
 * snapshot has no writer in flight: no statement there.
 */
const [LOCK_BEFORE, LOCK_AFTER] = LOG_LOCK("\u0000").split("\u0000") as [string, string];
const LOG_READ_LOCK = sql("the room's log, locked for a read")`${p.only({
  postgres: sql(
    "the room's log lock",
  )`SELECT pg_advisory_xact_lock(${LOCK_BEFORE}${p.text("roomId")}${LOCK_AFTER})`,
})}`;

const EVENTS = sql("a room's log lines")`
  SELECT seq, room_id, at, kind, run_id, task_id, term, actor, data FROM events
   WHERE room_id = ${p.text("roomId")} AND seq > ${p.int("since")} ORDER BY seq ${p.limit("limit")}`;

/** The run-ending decisions whose event names a person (`data.by`). */
const ENDED_BY_KINDS = ["run.canceling", "run.canceled", "run.rejected"];

// The room's events walked newest first (by room and seq): the decision is among the newest when
// the final message asks.
const ENDED_BY = sql("who ended a run")`
  SELECT data FROM events WHERE room_id = ${p.text("roomId")} AND run_id = ${p.text("runId")}
     AND kind${p.inList("kinds")} ORDER BY seq DESC LIMIT 3`;

/** Default page of readEvents: enough for a status card, small enough to stream. */
export const DEFAULT_EVENTS_LIMIT = 1000;

/**
 * Many nodes' heartbeats in one statement, each written as a heartbeat of its own: a new boot id
 * starts the node again, and every field is as its beat sent it. A node named twice is written once,
 * as its last beat (PostgreSQL refuses to upsert one row twice in a statement; the later beat is the
 * newer word). A bad beat refuses the whole batch, before anything is written. Rows go in node id
 * order, so two batches racing over the same nodes lock them in the same order.
 */
export function* heartbeats(beats: readonly NodeHeartbeat[]): Script<void> {
  for (const beat of beats) checkCapacity(beat.capacity);
  const last = new Map<string, NodeHeartbeat>();
  for (const beat of beats) last.set(beat.session.nodeId, beat);
  if (last.size === 0) return;
  const table = [...last.values()]
    .sort((a, b) => (a.session.nodeId < b.session.nodeId ? -1 : a.session.nodeId > b.session.nodeId ? 1 : 0))
    .map((beat) => ({
      node: beat.session.nodeId,
      boot: beat.session.bootId,
      labels: beat.labels,
      capacity: beat.capacity,
      actions: beat.actions,
      rooms: beat.roomIds,
      specs: beat.actionSpecs ?? {},
      undecryptable: beat.undecryptable ?? 0,
      reason: beat.undecryptableReason ?? null,
      signed: beat.deviceSigned ?? null,
      rel: beat.release ?? null,
      proto: beat.protocol ?? null,
    }));
  yield* run(HEARTBEATS, { beats: table });
}

export function* listNodes(): Script<NodeRecord[]> {
  const m = yield* mappers();
  return (yield* rows(NODES)).map(m.toNode);
}

/** Only the boot that registered: a node's row another boot took over is a conflict naming it. */
export function* removeNode(session: Session): Script<void> {
  if ((yield* run(REMOVE, { node: session.nodeId, boot: session.bootId })) === 1) return;
  const r = yield* row<{ boot_id: string }>(NODE_BOOT, { node: session.nodeId });
  if (r === undefined) throw new NotFoundError("remove node", { nodeId: session.nodeId });
  throw new ConflictError("remove node", { bootId: session.bootId }, { bootId: r.boot_id });
}

export function* rememberIdempotencyKey(
  scope: string,
  key: string,
  result: Record<string, unknown>,
): Script<{ kind: "new" } | { kind: "existing"; result: Record<string, unknown> }> {
  if ((yield* run(REMEMBER, { scope, key, result })) === 1) return { kind: "new" };
  return { kind: "existing", result: (yield* readIdempotencyKey(scope, key)) ?? {} };
}

export function* readIdempotencyKey(scope: string, key: string): Script<Record<string, unknown> | null> {
  const m = yield* mappers();
  const r = yield* row(KEY, { scope, key });
  return r === undefined ? null : m.json<Record<string, unknown>>(r.result);
}

/** Lines of a room after `sinceSeq`: the complete prefix, so the next read "since" the last seq misses nothing. */
export function* readEvents(roomId: string, sinceSeq: number, limit?: number): Script<LogEvent[]> {
  const m = yield* mappers();
  yield* rows(LOG_READ_LOCK, { roomId });
  const found = yield* rows(EVENTS, {
    roomId,
    since: sinceSeq,
    limit: Math.max(0, Math.floor(limit ?? DEFAULT_EVENTS_LIMIT)),
  });
  return found.map(m.toLogEvent);
}

/** Who canceled or rejected a run: its newest deciding event that names a person. */
export function* runEndedBy(roomId: string, runId: string): Script<string | null> {
  const m = yield* mappers();
  for (const r of yield* rows(ENDED_BY, { roomId, runId, kinds: ENDED_BY_KINDS })) {
    const by = m.json<Record<string, unknown>>(r.data)["by"];
    if (typeof by === "string") return by;
  }
  return null;
}
