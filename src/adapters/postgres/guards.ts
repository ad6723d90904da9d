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
import { mapError } from "./sql.js";
export { LOG_CTES } from "../store-common/postgres-text.js";
import { fenceConflict, runScript } from "./script-driver.js";

/**
 * The fence's condition (FENCE_HOLDS, store-common/ops/fence.ts) compiled for a statement of this
 * adapter's own: $1 the clock, its four values (room, node, boot, term; fenceParams' order)
 * renumbered to start at `at`.
 */
export function fenceHoldsText(at: number): string {
  // FENCE_HOLDS compiles with the clock as $1 and its values, in fenceParams' order, as $2…$5.
  const compiled = compile(FENCE_HOLDS, "postgres");
  const names = compiled.order.map((slot) => (slot.kind === "now" ? "now" : slot.name)).join();
  if (names !== "now,roomId,node,boot,term") throw new Error(`fenceHoldsText: FENCE_HOLDS takes ${names}`);
  return compiled.text.replace(/\$(\d+)::/g, (whole, n: string) =>
    n === "1" ? whole : `$${Number(n) - 2 + at}::`,
  );
}

/**
 * The fence as a CTE for single-statement leader writes: `fence` has one row while the lease still
 * names this fence unexpired, and locks it FOR SHARE until the statement's transaction commits.
 * Parameters: $1 clock, then the four at `at` (room, node, boot, term).
 */
export function fenceCte(at: number): string {
  return `fence AS (
    SELECT 1 FROM room_leases WHERE ${fenceHoldsText(at)}
     FOR SHARE)`;
}

export const fenceParams = (f: LeaderFence): unknown[] => [
  f.roomId,
  f.session.nodeId,
  f.session.bootId,
  f.term,
];

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
