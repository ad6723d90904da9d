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

export const DEMAND = sql("the room's claim demand")`
  SELECT 'node' AS k, node_id AS a, boot_id AS b, labels, actions, capacity AS n
    FROM nodes WHERE ${LIVE_NODES}
  UNION ALL
  SELECT 'ready', action, node_pin, labels, NULL, count(*)
    FROM tasks WHERE ${QUEUED} AND (not_before IS NULL OR not_before <= ${p.now})
   GROUP BY action, node_pin, labels
  UNION ALL
  SELECT 'next', NULL, NULL, NULL, NULL, min(not_before) - ${p.now}
    FROM tasks WHERE ${QUEUED} AND not_before > ${p.now}
  UNION ALL
  SELECT 'busy', executor_node, executor_boot, NULL, NULL, count(*)
    FROM tasks WHERE status IN ('running','canceling')
     AND executor_node IN (SELECT node_id FROM nodes WHERE ${LIVE_NODES})
   GROUP BY executor_node, executor_boot`;

interface DemandRow {
  k: "node" | "ready" | "next" | "busy";
  a: string | null;
  b: string | null;
  labels: unknown;
  actions: unknown;
  n: number | string | null;
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
    if (r.k === "ready")
      ready.push({ action: String(r.a), pin: r.b, labels: m.json<string[]>(r.labels), count: Number(r.n) });
    else if (r.k === "node")
      live.push({
        nodeId: String(r.a),
        bootId: String(r.b),
        capacity: Number(r.n),
        labels: new Set(m.json<string[]>(r.labels)),
        actions: new Set(m.json<string[]>(r.actions)),
      });
    else if (r.k === "busy") busy.set(`${r.a}/${r.b}`, Number(r.n));
    else if (r.n !== null) nextReadyInMs = Math.max(0, Number(r.n));
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
