/**
 * The shapes of guarded writes and fenced reads: the fence as a CTE, the event-log CTEs of a
 * single-statement write, a read made under a fence, and the read-back that explains a write that
 * changed nothing (fence lost, row missing, or row in another state).
 */
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { LeaderFence } from "../../ports/store.js";
import type { Db, Queryable, Row } from "./db.js";
import { LOG_LOCK, mapError, NOW } from "./sql.js";
import { fenceConflict } from "./script-driver.js";

/**
 * The fence as a CTE for single-statement leader writes: `fence` has one row while the lease still
 * names this fence unexpired, and locks it FOR SHARE until the statement's transaction commits.
 * Parameters: $1 clock, then the four at `at` (room, node, boot, term).
 */
export function fenceCte(at: number): string {
  return `fence AS (
    SELECT 1 FROM room_leases
     WHERE room_id = $${at} AND holder_node = $${at + 1} AND holder_boot = $${at + 2} AND term = $${at + 3}
       AND expires_at > ${NOW}
     FOR SHARE)`;
}

export const fenceParams = (f: LeaderFence): unknown[] => [
  f.roomId,
  f.session.nodeId,
  f.session.bootId,
  f.term,
];

/**
 * The event-log CTEs for a single-statement write whose CTE `src` yields one row per log line with
 * columns room_id, ord, kind, run_id, task_id, term, actor, data. `log_lock` reads `src`, so the
 * room's log lock is taken after the write has locked its rows (the log lock is always the last
 * lock a transaction takes), and seq is drawn per inserted row after that lock, in `ord` order.
 */
export const LOG_CTES = `
  log_lock AS (
    SELECT room_id, pg_advisory_xact_lock_shared(${LOG_LOCK("room_id")}) AS locked
      FROM (SELECT DISTINCT room_id FROM src) r),
  log_ins AS (
    INSERT INTO events (room_id, at, kind, run_id, task_id, term, actor, data)
    SELECT src.room_id, ${NOW}, src.kind, src.run_id, src.task_id, src.term, src.actor, src.data
      FROM src JOIN log_lock USING (room_id)
     ORDER BY src.ord
    RETURNING 1)`;

/**
 * A read made under a fence: the rows of `inner` (a SELECT whose parameters start at $6) if the
 * fence still holds the room's unexpired lease, else ConflictError. One round trip.
 */
export async function fencedRead(
  db: Db,
  operation: string,
  fence: LeaderFence,
  inner: string,
  params: unknown[],
): Promise<Row[]> {
  const rows = await db.one<{ fenced: boolean; rows: Row[] }>(
    operation,
    `WITH f AS (
       SELECT 1 FROM room_leases
        WHERE room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text AND term = $5::bigint
          AND expires_at > ${NOW})
     SELECT EXISTS (SELECT 1 FROM f) AS fenced,
            CASE WHEN EXISTS (SELECT 1 FROM f) THEN coalesce((SELECT json_agg(x) FROM (${inner}) x), '[]') END AS rows`,
    [db.clockParam(), ...fenceParams(fence), ...params],
  );
  const r = rows[0];
  if (r === undefined || !r.fenced) throw await fenceConflict(db, operation, fence);
  return r.rows;
}

/**
 * After a guarded write changed nothing, find out why: the fence lost (ConflictError on the lease),
 * the row missing (NotFoundError), or the row in another state (ConflictError with what was found).
 */
export async function explainMiss(
  db: Db,
  q: Queryable,
  operation: string,
  fence: LeaderFence | null,
  key: Record<string, unknown>,
  expected: Record<string, unknown>,
  foundSql: string,
  foundParams: unknown[],
): Promise<Error> {
  try {
    if (fence !== null) {
      const { rows } = await q.query(
        `SELECT 1 FROM room_leases WHERE room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text
          AND term = $5::bigint AND expires_at > ${NOW}`,
        [db.clockParam(), ...fenceParams(fence)],
      );
      if (rows.length === 0) return await fenceConflict(db, operation, fence, q);
    }
    const { rows } = await q.query(foundSql, foundParams);
    const found = rows[0];
    if (found === undefined) return new NotFoundError(operation, key);
    return new ConflictError(operation, { ...key, ...expected }, found);
  } catch (e) {
    // Reading why failed too (e.g. the connection dropped): report that instead.
    return mapError(operation, e);
  }
}
