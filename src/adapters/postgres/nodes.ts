/** Nodes, idempotency keys and the event log on PostgreSQL: the small tables around the state machines. */
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { LogEvent, NodeHeartbeat, NodeRecord, Session } from "../../ports/store.js";
import type { Db } from "./db.js";
import { json, LOG_LOCK, NOW } from "./sql.js";
import { toLogEvent, toNode } from "./rows.js";
import { checkCapacity } from "../store-common/checks.js";

export async function heartbeat(db: Db, beat: NodeHeartbeat): Promise<void> {
  checkCapacity(beat.capacity);
  // Not in the event log: heartbeats are liveness, not state, and belong to no single room.
  await db.one(
    "heartbeat",
    `INSERT INTO nodes AS n (node_id, boot_id, labels, capacity, actions, room_ids, heartbeat_at, started_at, action_specs, undecryptable, undecryptable_reason, device_signed, release, protocol)
     VALUES ($2, $3, $4::text[], $5, $6::text[], $7::text[], ${NOW}, ${NOW}, $8::jsonb, $9, $10, $11, $12, $13)
     ON CONFLICT (node_id) DO UPDATE SET
       boot_id = excluded.boot_id, labels = excluded.labels, capacity = excluded.capacity,
       actions = excluded.actions, room_ids = excluded.room_ids, heartbeat_at = excluded.heartbeat_at,
       action_specs = excluded.action_specs, undecryptable = excluded.undecryptable,
       undecryptable_reason = excluded.undecryptable_reason, device_signed = excluded.device_signed,
       release = excluded.release, protocol = excluded.protocol,
       started_at = CASE WHEN n.boot_id = excluded.boot_id THEN n.started_at ELSE excluded.started_at END`,
    [
      db.clockParam(),
      beat.session.nodeId,
      beat.session.bootId,
      beat.labels,
      beat.capacity,
      beat.actions,
      beat.roomIds,
      json(beat.actionSpecs ?? {}),
      beat.undecryptable ?? 0,
      beat.undecryptableReason ?? null,
      beat.deviceSigned ?? null,
      beat.release ?? null,
      beat.protocol ?? null,
    ],
  );
}

export async function listNodes(db: Db): Promise<NodeRecord[]> {
  const rows = await db.one(
    "list nodes",
    `SELECT n.node_id, n.boot_id, n.labels, n.capacity, n.actions, n.room_ids, n.heartbeat_at, n.started_at,
            n.action_specs, n.undecryptable, n.undecryptable_reason, n.device_signed, n.release, n.protocol,
            ${NOW} - n.heartbeat_at AS age_ms,
            coalesce(r.n, 0) AS running_tasks
       FROM nodes n
       LEFT JOIN (SELECT executor_node, executor_boot, count(*) AS n FROM tasks
                   WHERE status IN ('running','canceling') GROUP BY executor_node, executor_boot) r
              ON r.executor_node = n.node_id AND r.executor_boot = n.boot_id
      ORDER BY n.node_id`,
    [db.clockParam()],
  );
  return rows.map(toNode);
}

export async function removeNode(db: Db, session: Session): Promise<void> {
  const rows = await db.one(
    "remove node",
    `WITH del AS (DELETE FROM nodes WHERE node_id = $1 AND boot_id = $2 RETURNING 1)
     SELECT (SELECT count(*) FROM del) AS deleted, (SELECT boot_id FROM nodes WHERE node_id = $1) AS boot_id`,
    [session.nodeId, session.bootId],
  );
  const r = rows[0] as { deleted: number; boot_id: string | null } | undefined;
  if (r !== undefined && r.deleted === 1) return;
  if (r === undefined || r.boot_id === null)
    throw new NotFoundError("remove node", { nodeId: session.nodeId });
  throw new ConflictError("remove node", { bootId: session.bootId }, { bootId: r.boot_id });
}

export async function rememberIdempotencyKey(
  db: Db,
  scope: string,
  key: string,
  result: Record<string, unknown>,
): Promise<{ kind: "new" } | { kind: "existing"; result: Record<string, unknown> }> {
  // ON CONFLICT waits for a racing inserter to commit; its row is then read by a second statement,
  // whose fresh snapshot sees it (the first statement's snapshot may not).
  const inserted = await db.one(
    "remember idempotency key",
    `INSERT INTO idempotency_keys (scope, key, result, created_at) VALUES ($2, $3, $4::jsonb, ${NOW})
     ON CONFLICT DO NOTHING RETURNING 1`,
    [db.clockParam(), scope, key, json(result)],
  );
  if (inserted.length === 1) return { kind: "new" };
  const rows = await db.one<{ result: Record<string, unknown> }>(
    "remember idempotency key",
    "SELECT result FROM idempotency_keys WHERE scope = $1 AND key = $2",
    [scope, key],
  );
  return { kind: "existing", result: rows[0]?.result ?? {} };
}

export async function readIdempotencyKey(
  db: Db,
  scope: string,
  key: string,
): Promise<Record<string, unknown> | null> {
  const rows = await db.one<{ result: Record<string, unknown> }>(
    "read idempotency key",
    "SELECT result FROM idempotency_keys WHERE scope = $1 AND key = $2",
    [scope, key],
  );
  return rows[0]?.result ?? null;
}

/** Default page of readEvents: enough for a status card, small enough to stream. */
export const DEFAULT_EVENTS_LIMIT = 1000;

/**
 * Lines of a room after `sinceSeq`. The exclusive log lock waits out every writer of the room that
 * may hold a seq it has not committed yet, and the read's snapshot is taken after it: what this
 * returns is the complete prefix, so the next read "since" the last seq misses nothing.
 */
export function readEvents(db: Db, roomId: string, sinceSeq: number, limit?: number): Promise<LogEvent[]> {
  return db.tx("read events", async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(${LOG_LOCK("$1::text")})`, [roomId]);
    const { rows } = await tx.query(
      `SELECT seq, room_id, at, kind, run_id, task_id, term, actor, data FROM events
        WHERE room_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [roomId, sinceSeq, Math.max(0, Math.floor(limit ?? DEFAULT_EVENTS_LIMIT))],
    );
    return rows.map(toLogEvent);
  });
}

/** The run-ending decisions whose event names a person (`data.by`). */
const ENDED_BY_KINDS = ["run.canceling", "run.canceled", "run.rejected"];

/**
 * Who canceled or rejected a run: its newest deciding event. The room's events are walked newest
 * first (by room and seq) and the decision is among the newest when the final message asks.
 */
export async function runEndedBy(db: Db, roomId: string, runId: string): Promise<string | null> {
  const rows = await db.one<{ by: string | null }>(
    "read who ended a run",
    `SELECT data->>'by' AS by FROM events WHERE room_id = $1 AND run_id = $2 AND kind = ANY($3::text[])
      ORDER BY seq DESC LIMIT 3`,
    [roomId, runId, ENDED_BY_KINDS],
  );
  return rows.find((r) => typeof r.by === "string")?.by ?? null;
}
