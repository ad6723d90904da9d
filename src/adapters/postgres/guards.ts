/**
 * The shapes of PostgreSQL's guarded one-statement writes: the fence as a CTE, the event-log CTEs of
 * a single-statement write, and the read-back that explains a write that changed nothing (fence
 * lost, row missing, or row in another state).
 */
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { LeaderFence } from "../../ports/store.js";
import { FENCE_HOLDS, fenceHolds } from "../store-common/ops/fence.js";
import { compile } from "../store-common/script.js";
import type { Db, Queryable } from "./db.js";
import { LOG_LOCK, mapError, NOW } from "./sql.js";
import { fenceConflict, runScript } from "./script-driver.js";

/**
 * The fence as a CTE for single-statement leader writes: `fence` has one row while the lease still
 * names this fence unexpired, and locks it FOR SHARE until the statement's transaction commits.
 * Parameters: $1 clock, then the four at `at` (room, node, boot, term). Its condition is FENCE_HOLDS
 * (store-common/ops/fence.ts), compiled, its values renumbered to start at `at`.
 */
export function fenceCte(at: number): string {
  // FENCE_HOLDS compiles with the clock as $1 and its values, in fenceParams' order, as $2…$5.
  const compiled = compile(FENCE_HOLDS, "postgres");
  const names = compiled.order.map((slot) => (slot.kind === "now" ? "now" : slot.name)).join();
  if (names !== "now,roomId,node,boot,term") throw new Error(`fenceCte: FENCE_HOLDS takes ${names}`);
  const holds = compiled.text.replace(/\$(\d+)::/g, (whole, n: string) =>
    n === "1" ? whole : `$${Number(n) - 2 + at}::`,
  );
  return `fence AS (
    SELECT 1 FROM room_leases WHERE ${holds}
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
      const holds = await runScript(
        { query: (text, values) => q.query(text, values), clockParam: db.clockParam() },
        fenceHolds(fence),
      );
      if (!holds) return await fenceConflict(db, operation, fence, q);
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
