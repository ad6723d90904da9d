/**
 * Whom the leader wakes on SQLite: the room's ready queued tasks and the live nodes serving it with
 * their free slots and how many of those tasks each could run. The wake itself reaches this
 * process's listeners by name; other processes hear every commit through the data_version poll.
 */
import type { ClaimDemand, NodeSlots } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";

interface QueuedRow {
  action: string;
  labels: string;
  node_pin: string | null;
  not_before: number | null;
}

interface NodeRow {
  node_id: string;
  boot_id: string;
  capacity: number;
  labels: string;
  actions: string;
  room_ids: string;
}

export function claimDemand(c: SqliteConnection, roomId: string, liveWithinMs: number): Promise<ClaimDemand> {
  return c.read("claim demand", (now) => {
    const queued = c.all<QueuedRow>(
      "SELECT action, labels, node_pin, not_before FROM tasks WHERE room_id = ? AND status = 'queued'",
      roomId,
    );
    const ready = queued.filter((t) => t.not_before === null || t.not_before <= now);
    const waiting = queued.filter((t) => t.not_before !== null && t.not_before > now);
    const nextReadyInMs =
      waiting.length === 0 ? null : Math.min(...waiting.map((t) => (t.not_before ?? now) - now));
    if (ready.length === 0) return { ready: 0, nextReadyInMs, nodes: [] };
    const busy = new Map(
      c
        .all<{ node: string; boot: string; n: number }>(
          `SELECT executor_node AS node, executor_boot AS boot, count(*) AS n FROM tasks
            WHERE status IN ('running','canceling') GROUP BY executor_node, executor_boot`,
        )
        .map((r) => [`${r.node}/${r.boot}`, r.n]),
    );
    const nodes: NodeSlots[] = [];
    for (const n of c.all<NodeRow>(
      "SELECT node_id, boot_id, capacity, labels, actions, room_ids FROM nodes WHERE heartbeat_at > ?",
      now - liveWithinMs,
    )) {
      if (!(JSON.parse(n.room_ids) as string[]).includes(roomId)) continue;
      const labels = new Set(JSON.parse(n.labels) as string[]);
      const actions = new Set(JSON.parse(n.actions) as string[]);
      const fits = ready.filter(
        (t) =>
          actions.has(t.action) &&
          (t.node_pin === null || t.node_pin === n.node_id) &&
          (JSON.parse(t.labels) as string[]).every((l) => labels.has(l)),
      ).length;
      nodes.push({
        nodeId: n.node_id,
        free: n.capacity - (busy.get(`${n.node_id}/${n.boot_id}`) ?? 0),
        fits,
      });
    }
    return { ready: ready.length, nextReadyInMs, nodes };
  });
}
