/**
 * The leader lease fence, built once for both stores (docs/architecture.md §3, "Lease"): a leader's
 * write changes nothing unless the room's lease still names its session and term, unexpired by the
 * store's clock. Checked inside the write's transaction: SQLite's write holds the database lock, and
 * PostgreSQL's check takes a shared lock on the lease row, so no takeover slips in before the commit.
 */
import { ConflictError } from "../../../ports/errors.js";
import type { LeaderFence } from "../../../ports/store.js";
import { holderKey, sessionKey } from "../records.js";
import type { Param, Script, Statement } from "../script.js";
import { p, row, sql } from "../script.js";

/** A value of the fence's condition: a named value, or SQL text (a column, a subquery). */
type Slot = Param | string;

/**
 * The fence's condition on a `room_leases` row, the one place it is written: the lease names this
 * session and term, unexpired by the store's clock. `lease` qualifies the columns (an alias, or ""
 * for none); a batch of renewals gives each row's term as a subquery.
 */
export function leaseHeldBy(lease: string, by: { node: Slot; boot: Slot; term: Slot }): Statement {
  const col = (name: string): string => (lease === "" ? name : `${lease}.${name}`);
  return sql("the lease is held")`${col("holder_node")} = ${by.node} AND ${col("holder_boot")} = ${by.boot}
     AND ${col("term")} = ${by.term} AND ${col("expires_at")} > ${p.now}`;
}

/**
 * The fence's condition on the room's `room_leases` row, its values `fenceValues(fence)`.
 * Statements embed it (`sql(…)\`… WHERE ${FENCE_HOLDS}\``), in a script or in a one-statement write.
 */
export const FENCE_HOLDS = sql("the fence's condition")`room_id = ${p.text("roomId")} AND ${leaseHeldBy("", {
  node: p.text("node"),
  boot: p.text("boot"),
  term: p.int("term"),
})}`;

const HELD = sql("the room's lease, as this fence holds it")`
  SELECT 1 AS held FROM room_leases WHERE ${FENCE_HOLDS}${p.only({ postgres: " FOR SHARE" })}`;

export const LEASE_AS_FOUND = sql("the room's lease, as found")`
  SELECT holder_node, holder_boot, term, expires_at, ${p.now} AS now FROM room_leases WHERE room_id = ${p.text("roomId")}`;

const HOLDS = sql("the room's lease, unlocked, if this fence holds it")`
  SELECT 1 AS held FROM room_leases WHERE ${FENCE_HOLDS}`;

/** Whether `fence` still holds its room, without locking the lease row (explaining a write that missed). */
export function* fenceHolds(fence: LeaderFence): Script<boolean> {
  return (yield* row(HOLDS, fenceValues(fence))) !== undefined;
}

/** The named values of the fence's statements. */
export const fenceValues = (fence: LeaderFence): Record<string, unknown> => ({
  roomId: fence.roomId,
  node: fence.session.nodeId,
  boot: fence.session.bootId,
  term: fence.term,
});

/** Throws ConflictError, naming the lease as found, unless `fence` still holds its room. */
export function* holdFence(operation: string, fence: LeaderFence): Script<void> {
  if ((yield* row(HELD, fenceValues(fence))) !== undefined) return;
  throw yield* fenceConflict(operation, fence);
}

/** The ConflictError for a fence that no longer holds, with the lease as found now. */
export function* fenceConflict(operation: string, fence: LeaderFence): Script<ConflictError> {
  const r = yield* row<{
    holder_node: string | null;
    holder_boot: string | null;
    term: number;
    expires_at: number;
    now: number;
  }>(LEASE_AS_FOUND, { roomId: fence.roomId });
  return new ConflictError(
    operation,
    { roomId: fence.roomId, holder: sessionKey(fence.session), term: fence.term, unexpired: true },
    r === undefined
      ? null
      : {
          holder: holderKey(r.holder_node, r.holder_boot),
          term: r.term,
          expiresAt: r.expires_at,
          now: r.now,
        },
  );
}
