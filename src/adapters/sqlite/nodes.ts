/** Nodes, idempotency keys and the event log on SQLite: the small tables around the state machines. */
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { LogEvent, NodeHeartbeat, NodeRecord, Session } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";
import { LIMIT } from "./connection.js";
import { toLogEvent, toNode } from "./rows.js";
import { checkCapacity } from "../store-common/checks.js";

export function heartbeat(c: SqliteConnection, beat: NodeHeartbeat): Promise<void> {
  checkCapacity(beat.capacity);
  // Not in the event log: heartbeats are liveness, not state, and belong to no single room.
  return c.write("heartbeat", (tx) => {
    c.run(
      `INSERT INTO nodes (node_id, boot_id, labels, capacity, actions, room_ids, heartbeat_at, started_at, action_specs, undecryptable, undecryptable_reason, device_signed, release, protocol)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (node_id) DO UPDATE SET
         boot_id = excluded.boot_id, labels = excluded.labels, capacity = excluded.capacity,
         actions = excluded.actions, room_ids = excluded.room_ids, heartbeat_at = excluded.heartbeat_at,
         action_specs = excluded.action_specs, undecryptable = excluded.undecryptable,
         undecryptable_reason = excluded.undecryptable_reason, device_signed = excluded.device_signed,
         release = excluded.release, protocol = excluded.protocol,
         started_at = CASE WHEN nodes.boot_id = excluded.boot_id THEN nodes.started_at ELSE excluded.started_at END`,
      beat.session.nodeId,
      beat.session.bootId,
      JSON.stringify(beat.labels),
      beat.capacity,
      JSON.stringify(beat.actions),
      JSON.stringify(beat.roomIds),
      tx.now,
      tx.now,
      JSON.stringify(beat.actionSpecs ?? {}),
      beat.undecryptable ?? 0,
      beat.undecryptableReason ?? null,
      beat.deviceSigned === undefined || beat.deviceSigned === null ? null : beat.deviceSigned ? 1 : 0,
      beat.release ?? null,
      beat.protocol ?? null,
    );
  });
}

export function listNodes(c: SqliteConnection): Promise<NodeRecord[]> {
  return c.read("list nodes", (now) =>
    c
      .all(
        `SELECT n.*, ? - n.heartbeat_at AS age_ms,
                (SELECT COUNT(*) FROM tasks t
                  WHERE t.executor_node = n.node_id AND t.executor_boot = n.boot_id
                    AND t.status IN ('running','canceling')) AS running_tasks
           FROM nodes n ORDER BY n.node_id`,
        now,
      )
      .map(toNode),
  );
}

export function removeNode(c: SqliteConnection, session: Session): Promise<void> {
  return c.write("remove node", () => {
    const n = c.run("DELETE FROM nodes WHERE node_id = ? AND boot_id = ?", session.nodeId, session.bootId);
    if (n === 1) return;
    const row = c.get<{ boot_id: string }>("SELECT boot_id FROM nodes WHERE node_id = ?", session.nodeId);
    if (row === undefined) throw new NotFoundError("remove node", { nodeId: session.nodeId });
    throw new ConflictError("remove node", { bootId: session.bootId }, { bootId: row.boot_id });
  });
}

export function rememberIdempotencyKey(
  c: SqliteConnection,
  scope: string,
  key: string,
  result: Record<string, unknown>,
): Promise<{ kind: "new" } | { kind: "existing"; result: Record<string, unknown> }> {
  return c.write("remember idempotency key", (tx) => {
    const n = c.run(
      "INSERT INTO idempotency_keys (scope, key, result, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
      scope,
      key,
      JSON.stringify(result),
      tx.now,
    );
    if (n === 1) return { kind: "new" as const };
    const row = c.get<{ result: string }>(
      "SELECT result FROM idempotency_keys WHERE scope = ? AND key = ?",
      scope,
      key,
    );
    return { kind: "existing" as const, result: JSON.parse(row?.result ?? "{}") as Record<string, unknown> };
  });
}

export function readIdempotencyKey(
  c: SqliteConnection,
  scope: string,
  key: string,
): Promise<Record<string, unknown> | null> {
  return c.read("read idempotency key", () => {
    const row = c.get<{ result: string }>(
      "SELECT result FROM idempotency_keys WHERE scope = ? AND key = ?",
      scope,
      key,
    );
    return row === undefined ? null : (JSON.parse(row.result) as Record<string, unknown>);
  });
}

/** Default page of readEvents: enough for a status card, small enough to stream. */
export const DEFAULT_EVENTS_LIMIT = 1000;

export function readEvents(
  c: SqliteConnection,
  roomId: string,
  sinceSeq: number,
  limit?: number,
): Promise<LogEvent[]> {
  return c.read("read events", () =>
    c
      .all(
        `SELECT seq, room_id, at, kind, run_id, task_id, term, actor, data FROM events WHERE room_id = ? AND seq > ? ORDER BY seq ${LIMIT}`,
        roomId,
        sinceSeq,
        limit ?? DEFAULT_EVENTS_LIMIT,
      )
      .map(toLogEvent),
  );
}

/** The run-ending decisions whose event names a person (`data.by`). */
const ENDED_BY_KINDS = ["run.canceling", "run.canceled", "run.rejected"];

/**
 * Who canceled or rejected a run: its newest deciding event. The room's events are walked newest
 * first (events_room_seq) and the decision is among the newest when the final message asks.
 */
export function runEndedBy(c: SqliteConnection, roomId: string, runId: string): Promise<string | null> {
  return c.read("read who ended a run", () => {
    const rows = c.all<{ data: string }>(
      `SELECT data FROM events WHERE room_id = ? AND run_id = ? AND kind IN (${ENDED_BY_KINDS.map(() => "?").join(", ")})
        ORDER BY seq DESC LIMIT 3`,
      roomId,
      runId,
      ...ENDED_BY_KINDS,
    );
    for (const row of rows) {
      const by = (JSON.parse(row.data) as Record<string, unknown>)["by"];
      if (typeof by === "string") return by;
    }
    return null;
  });
}
