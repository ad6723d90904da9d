/**
 * Whom the leader wakes (docs/architecture.md §4, "Work": as many nodes as there are tasks), written once
 * for both stores: the room's ready queued tasks, grouped by what a node needs to run them (action,
 * labels, pin), when the next waiting one becomes ready, and the live nodes serving the room with
 * their free slots (capacity minus the tasks their session runs in any room). One statement of
 * tagged rows; which node fits which group is decided here, in code, the same way for both stores
 * (taskFits). Also the queue's shapes for a core's look before its edges' claims (queuedShapes).
 */
import type { ClaimDemand, NodeSlots, QueuedShape } from "../../../ports/store.js";
import { taskFits } from "../../../domain/claim-fit.js";
import type { Script } from "../script.js";
import { mappers, p, rows, sql } from "../script.js";

/** The node's rooms hold the room (PostgreSQL: a text[]; SQLite: a JSON array). */
const SERVES_ROOM = p.only({
  postgres: sql("the node serves the room")`${p.text("roomId")} = ANY(room_ids)`,
  sqlite: sql(
    "the node serves the room",
  )`EXISTS (SELECT 1 FROM json_each(room_ids) WHERE value = ${p.text("roomId")})`,
});

const LIVE_NODES = sql("the live nodes serving the room")`heartbeat_at > ${p.now} - ${p.int("liveWithinMs")}
  AND ${SERVES_ROOM}`;

const QUEUED = sql("the room's queued tasks")`status = 'queued' AND room_id = ${p.text("roomId")}`;

const READY = sql("ready")`(not_before IS NULL OR not_before <= ${p.now})`;

/**
 * The room's queued tasks, one row each (the queue holds only what the caps admitted, so it is
 * short), and, only when one of them is ready, the live nodes and their running tasks. The queued
 * rows are read once into `q`; `go` holds a row only when one is ready, and the node and busy
 * branches join it, so an idle tick reads the empty queue and nothing else. Grouping is done in
 * code: on SQLite a GROUP BY here, or an EXISTS over the queue in each branch, cost 20 to 40 times
 * this form (0.24 ms against 0.012 ms on a mid-run snapshot of a 1,000-task run, where the leader
 * asks on every tick; docs/architecture.md §8, "Commits").
 */
export const DEMAND = sql("the room's claim demand")`
  WITH q AS MATERIALIZED (
    SELECT action, node_pin, labels, not_before, CASE WHEN ${READY} THEN 1 ELSE 0 END AS ready
      FROM tasks WHERE ${QUEUED}),
  go AS MATERIALIZED (SELECT 1 AS one FROM q WHERE ready = 1 LIMIT 1)
  SELECT 'queued' AS k, action AS a, node_pin AS b, labels, NULL AS actions, ready AS n,
         not_before - ${p.now} AS next
    FROM q
  UNION ALL
  SELECT 'node', node_id, boot_id, labels, actions, capacity, NULL
    FROM go, nodes WHERE ${LIVE_NODES}
  UNION ALL
  SELECT 'busy', executor_node, executor_boot, NULL, NULL, count(*), NULL
    FROM go, tasks WHERE status IN ('running','canceling')
     AND executor_node IN (SELECT node_id FROM nodes WHERE ${LIVE_NODES})
   GROUP BY executor_node, executor_boot`;

interface DemandRow {
  k: "node" | "queued" | "busy";
  a: string | null;
  b: string | null;
  labels: unknown;
  actions: unknown;
  n: number | string | null;
  next: number | string | null;
}

export function* claimDemand(roomId: string, liveWithinMs: number): Script<ClaimDemand> {
  const m = yield* mappers();
  const found = yield* rows<DemandRow>(DEMAND, { roomId, liveWithinMs: Math.ceil(liveWithinMs) });
  const ready = new Map<string, { action: string; pin: string | null; labels: unknown; count: number }>();
  const live: {
    nodeId: string;
    bootId: string;
    capacity: number;
    labels: Set<string>;
    actions: Set<string>;
  }[] = [];
  const busy = new Map<string, number>();
  let nextReadyInMs: number | null = null;
  for (const r of found) {
    if (r.k === "queued") {
      if (Number(r.n) > 0) {
        // Grouped by what a node needs; labels as stored (SQLite's JSON text, PostgreSQL's array).
        const key = `${r.a}\u0000${r.b ?? ""}\u0000${typeof r.labels === "string" ? r.labels : JSON.stringify(r.labels)}`;
        const group = ready.get(key);
        if (group === undefined)
          ready.set(key, { action: String(r.a), pin: r.b, labels: r.labels, count: 1 });
        else group.count += 1;
      } else if (r.next !== null)
        nextReadyInMs = Math.max(0, Math.min(nextReadyInMs ?? Infinity, Number(r.next)));
    } else if (r.k === "node")
      live.push({
        nodeId: String(r.a),
        bootId: String(r.b),
        capacity: Number(r.n),
        labels: new Set(m.json<string[]>(r.labels)),
        actions: new Set(m.json<string[]>(r.actions)),
      });
    else busy.set(`${r.a}/${r.b}`, Number(r.n));
  }
  const groups = [...ready.values()].map((t) => ({ ...t, labels: m.json<string[]>(t.labels) }));
  const count = groups.reduce((sum, t) => sum + t.count, 0);
  if (count === 0) return { ready: 0, nextReadyInMs, nodes: [] };
  const nodes: NodeSlots[] = live.map((n) => ({
    nodeId: n.nodeId,
    free: n.capacity - (busy.get(`${n.nodeId}/${n.bootId}`) ?? 0),
    fits: groups.filter((t) => taskFits(t, n)).reduce((sum, t) => sum + t.count, 0),
  }));
  return { ready: count, nextReadyInMs, nodes };
}

/**
 * The queued tasks of the rooms grouped by what a node needs (QueuedShape): a core's look before its
 * edges' claims (src/app/claim-gate.ts). One read, no transaction; the queue holds only what the
 * caps admitted, so it is short, and its groups fewer.
 */
export const SHAPES = sql("the queue's shapes")`
  SELECT room_id, action, node_pin, labels,
         sum(CASE WHEN ${READY} THEN 1 ELSE 0 END) AS ready,
         min(CASE WHEN ${READY} THEN NULL ELSE not_before END) - ${p.now} AS next
    FROM tasks WHERE status = 'queued' AND room_id${p.inList("rooms")}
   GROUP BY room_id, action, node_pin, labels`;

interface ShapeRow {
  room_id: string;
  action: string;
  node_pin: string | null;
  labels: unknown;
  ready: number | string;
  next: number | string | null;
}

export function* queuedShapes(roomIds: readonly string[]): Script<QueuedShape[]> {
  const m = yield* mappers();
  const found = yield* rows<ShapeRow>(SHAPES, { rooms: [...roomIds] });
  return found.map((r) => ({
    roomId: r.room_id,
    action: r.action,
    pin: r.node_pin,
    labels: m.json<string[]>(r.labels),
    ready: Number(r.ready),
    nextReadyInMs: r.next === null ? null : Math.max(0, Number(r.next)),
  }));
}
