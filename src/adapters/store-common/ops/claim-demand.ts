/**
 * Whom the leader wakes (docs/architecture.md §4, "Work": as many nodes as there are tasks), written once
 * for both stores: the room's ready queued tasks, grouped by what a node needs to run them (action,
 * labels, pin), when the next waiting one becomes ready, and the live nodes serving the room with
 * their free slots (capacity minus the tasks their session runs in any room). One statement of
 * tagged rows; which node fits which group is decided here, in code, the same way for both stores.
 */
import type { ClaimDemand, NodeSlots } from "../../../ports/store.js";
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
 * The queued tasks grouped by what a node needs, each group's ready count and the earliest time one
 * of its waiting tasks becomes ready, in one pass over the queue's partial index; the live nodes
 * and their running tasks only when some task is ready. A leader asks on every tick and mostly
 * finds the queue empty: then this reads the empty queue and nothing else.
 */
export const DEMAND = sql("the room's claim demand")`
  SELECT 'queued' AS k, action AS a, node_pin AS b, labels, NULL AS actions,
         sum(CASE WHEN ${READY} THEN 1 ELSE 0 END) AS n,
         min(CASE WHEN ${READY} THEN NULL ELSE not_before END) - ${p.now} AS next
    FROM tasks WHERE ${QUEUED}
   GROUP BY action, node_pin, labels
  UNION ALL
  SELECT 'node', node_id, boot_id, labels, actions, capacity, NULL
    FROM nodes WHERE ${LIVE_NODES} AND EXISTS (SELECT 1 FROM tasks WHERE ${QUEUED} AND ${READY})
  UNION ALL
  SELECT 'busy', executor_node, executor_boot, NULL, NULL, count(*), NULL
    FROM tasks WHERE status IN ('running','canceling')
     AND executor_node IN (SELECT node_id FROM nodes WHERE ${LIVE_NODES})
     AND EXISTS (SELECT 1 FROM tasks WHERE ${QUEUED} AND ${READY})
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
  const ready: { action: string; pin: string | null; labels: string[]; count: number }[] = [];
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
      if (Number(r.n) > 0)
        ready.push({ action: String(r.a), pin: r.b, labels: m.json<string[]>(r.labels), count: Number(r.n) });
      if (r.next !== null) nextReadyInMs = Math.max(0, Math.min(nextReadyInMs ?? Infinity, Number(r.next)));
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
  const count = ready.reduce((sum, t) => sum + t.count, 0);
  if (count === 0) return { ready: 0, nextReadyInMs, nodes: [] };
  const nodes: NodeSlots[] = live.map((n) => ({
    nodeId: n.nodeId,
    free: n.capacity - (busy.get(`${n.nodeId}/${n.bootId}`) ?? 0),
    fits: ready
      .filter(
        (t) =>
          n.actions.has(t.action) &&
          (t.pin === null || t.pin === n.nodeId) &&
          t.labels.every((l) => n.labels.has(l)),
      )
      .reduce((sum, t) => sum + t.count, 0),
  }));
  return { ready: count, nextReadyInMs, nodes };
}
