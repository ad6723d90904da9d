/**
 * Whom the leader wakes on PostgreSQL: one statement reads the room's ready queued tasks and, when
 * there are any, the live nodes serving the room with their free slots (capacity minus the tasks
 * their session runs in any room) and how many of the ready tasks each could run. The wake is a
 * NOTIFY naming the nodes, so only they claim.
 */
import type { ClaimDemand } from "../../ports/store.js";
import { wakePayloads } from "./change-feed.js";
import type { Db } from "./db.js";
import { NOW } from "./sql.js";

const DEMAND_SQL = `WITH q AS (
    SELECT action, labels, node_pin, not_before FROM tasks WHERE room_id = $2::text AND status = 'queued'),
  r AS (SELECT * FROM q WHERE not_before IS NULL OR not_before <= ${NOW}),
  head AS (
    SELECT (SELECT count(*) FROM r) AS ready,
           (SELECT min(not_before) FROM q WHERE not_before > ${NOW}) - ${NOW} AS next_in),
  n AS (
    SELECT node_id, boot_id, capacity, labels, actions FROM nodes, head
     WHERE head.ready > 0 AND $2::text = ANY(room_ids) AND heartbeat_at > ${NOW} - $3::bigint),
  busy AS (
    SELECT executor_node, executor_boot, count(*) AS k FROM tasks
     WHERE status IN ('running','canceling') AND executor_node IN (SELECT node_id FROM n)
     GROUP BY executor_node, executor_boot)
  SELECT head.ready, head.next_in, n.node_id, n.capacity - coalesce(busy.k, 0) AS free,
         (SELECT count(*) FROM r WHERE r.action = ANY(n.actions) AND r.labels <@ n.labels
                                   AND (r.node_pin IS NULL OR r.node_pin = n.node_id)) AS fits
    FROM head LEFT JOIN n ON true
         LEFT JOIN busy ON busy.executor_node = n.node_id AND busy.executor_boot = n.boot_id`;

export async function claimDemand(db: Db, roomId: string, liveWithinMs: number): Promise<ClaimDemand> {
  const rows = await db.one<{
    ready: number;
    next_in: number | null;
    node_id: string | null;
    free: number | null;
    fits: number | null;
  }>("claim demand", DEMAND_SQL, [db.clockParam(), roomId, Math.ceil(liveWithinMs)]);
  const head = rows[0];
  return {
    ready: Number(head?.ready ?? 0),
    nextReadyInMs: head?.next_in === null || head?.next_in === undefined ? null : Math.max(0, head.next_in),
    nodes: rows
      .filter((r) => r.node_id !== null)
      .map((r) => ({ nodeId: r.node_id ?? "", free: Number(r.free ?? 0), fits: Number(r.fits ?? 0) })),
  };
}

export function wakeNodes(db: Db, roomId: string, nodeIds: readonly string[]): Promise<void> {
  for (const payload of wakePayloads(roomId, nodeIds)) db.notifySoon(payload);
  return Promise.resolve();
}
