/** Room leases (leadership) on PostgreSQL: one statement each, judged by the rows it returns, on the store's clock. */
import type { LeaderFence, LeaseState, LeaseSync, LeaseWish, Session } from "../../ports/store.js";
import type { Db } from "./db.js";
import { LOG_CTES } from "./guards.js";
import { checkLeaseTtl } from "../store-common/checks.js";
import { acquiredFence } from "../../ports/lease-answer.js";
import { leaseFromRow } from "../store-common/records.js";
import { NOW, sessionKey } from "./sql.js";
import { fenceConflict } from "./script-driver.js";

const FENCED = `room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text AND term = $5::bigint
  AND expires_at > ${NOW}`;

export async function acquireLease(
  db: Db,
  roomId: string,
  session: Session,
  ttlMs: number,
): Promise<LeaderFence & { expiresAt: number }> {
  // One statement: a failed attempt costs no second read, its answer names holder and expiry.
  const [r] = await syncLeases(db, session, ttlMs, [{ roomId, term: null }]);
  if (r === undefined) throw new Error("acquire lease: no answer for the room");
  return acquiredFence(roomId, session, r);
}

/**
 * Every wish in one statement. Acquires: an upsert whose ON CONFLICT locks the existing row before
 * judging it, so of N racers exactly one sees it free. Renewals: fenced by holder, term and expiry.
 * The answer for a room nobody took is read from the statement's snapshot (the lease as it was).
 * Rooms are taken in room order so two nodes' statements lock rows in the same order.
 */
const SYNC_SQL = `WITH w AS (
     SELECT * FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS w(room_id, term, n)),
   up AS (
     INSERT INTO room_leases AS l (room_id, holder_node, holder_boot, term, expires_at)
     SELECT room_id, $4::text, $5::text, 1, ${NOW} + $6::bigint FROM w WHERE w.term IS NULL ORDER BY room_id
     ON CONFLICT (room_id) DO UPDATE
       SET holder_node = excluded.holder_node, holder_boot = excluded.holder_boot,
           term = l.term + 1, expires_at = excluded.expires_at
       WHERE l.holder_node IS NULL OR l.expires_at <= ${NOW}
     RETURNING room_id, term, expires_at),
   ren AS (
     UPDATE room_leases l SET expires_at = ${NOW} + $6::bigint
       FROM w
      WHERE w.term IS NOT NULL AND l.room_id = w.room_id AND l.holder_node = $4::text
        AND l.holder_boot = $5::text AND l.term = w.term AND l.expires_at > ${NOW}
     RETURNING l.room_id, l.term, l.expires_at),
   src AS (
     SELECT room_id, 1 AS ord, 'lease.acquired' AS kind, NULL::text AS run_id, NULL::text AS task_id,
            term, $7::text AS actor, jsonb_build_object('expiresAt', expires_at) AS data FROM up),
   ${LOG_CTES}
   SELECT w.room_id,
          CASE WHEN up.room_id IS NOT NULL THEN 'acquired' WHEN ren.room_id IS NOT NULL THEN 'renewed'
               WHEN w.term IS NULL THEN 'held' ELSE 'lost' END AS outcome,
          coalesce(up.term, ren.term, cur.term, 0) AS term,
          coalesce(up.expires_at, ren.expires_at, cur.expires_at, 0) AS expires_at,
          cur.holder_node, cur.holder_boot, ${NOW} AS now,
          CASE WHEN up.room_id IS NOT NULL THEN pg_notify('dagbot', 'lease:' || w.room_id) END AS notified
     FROM w LEFT JOIN up ON up.room_id = w.room_id LEFT JOIN ren ON ren.room_id = w.room_id
          LEFT JOIN room_leases cur ON cur.room_id = w.room_id
    ORDER BY w.n`;

export async function syncLeases(
  db: Db,
  session: Session,
  ttlMs: number,
  wishes: readonly LeaseWish[],
): Promise<LeaseSync[]> {
  checkLeaseTtl(ttlMs);
  if (wishes.length === 0) return [];
  const rooms = new Set(wishes.map((w) => w.roomId));
  if (rooms.size !== wishes.length) throw new RangeError("sync leases: a room is named twice");
  const rows = await db.one<{
    room_id: string;
    outcome: LeaseSync["outcome"];
    term: number;
    expires_at: number;
    holder_node: string | null;
    holder_boot: string | null;
    now: number;
  }>("sync leases", SYNC_SQL, [
    db.clockParam(),
    wishes.map((w) => w.roomId),
    wishes.map((w) => w.term),
    session.nodeId,
    session.bootId,
    Math.ceil(ttlMs),
    sessionKey(session),
  ]);
  return rows.map((r) => {
    const mine = r.outcome === "acquired" || r.outcome === "renewed";
    if (r.outcome === "acquired") db.committed("lease", r.room_id);
    return {
      roomId: r.room_id,
      outcome: r.outcome,
      holder: mine
        ? session
        : r.holder_node === null
          ? null
          : { nodeId: r.holder_node, bootId: r.holder_boot ?? "" },
      term: r.term,
      expiresAt: r.expires_at,
      now: r.now,
    };
  });
}

export async function renewLease(db: Db, fence: LeaderFence, ttlMs: number): Promise<{ expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  // Not logged: a renewal every few seconds would drown the log, and it changes no holder or term.
  const rows = await db.one<{ expires_at: number }>(
    "renew lease",
    `UPDATE room_leases SET expires_at = ${NOW} + $6::bigint WHERE ${FENCED} RETURNING expires_at`,
    [db.clockParam(), fence.roomId, fence.session.nodeId, fence.session.bootId, fence.term, Math.ceil(ttlMs)],
  );
  const r = rows[0];
  if (r === undefined) throw await fenceConflict(db, "renew lease", fence);
  return { expiresAt: r.expires_at };
}

export async function releaseLease(db: Db, fence: LeaderFence): Promise<void> {
  // The term stays: the next holder's term must be higher than every earlier one.
  const rows = await db.one(
    "release lease",
    `WITH up AS (
       UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = ${NOW}
        WHERE ${FENCED} RETURNING room_id, term),
     src AS (
       SELECT room_id, 1 AS ord, 'lease.released' AS kind, NULL::text AS run_id, NULL::text AS task_id,
              term, $6::text AS actor, '{}'::jsonb AS data FROM up),
     ${LOG_CTES}
     SELECT term, pg_notify('dagbot', 'lease:' || $2::text) FROM up`,
    [
      db.clockParam(),
      fence.roomId,
      fence.session.nodeId,
      fence.session.bootId,
      fence.term,
      sessionKey(fence.session),
    ],
  );
  if (rows.length === 0) throw await fenceConflict(db, "release lease", fence);
  db.committed("lease", fence.roomId);
}

export async function getLease(db: Db, roomId: string): Promise<LeaseState | null> {
  const rows = await db.one<{
    holder_node: string | null;
    holder_boot: string | null;
    term: number;
    expires_at: number;
    now: number;
  }>(
    "get lease",
    `SELECT holder_node, holder_boot, term, expires_at, ${NOW} AS now FROM room_leases WHERE room_id = $2`,
    [db.clockParam(), roomId],
  );
  const r = rows[0];
  return r === undefined ? null : leaseFromRow(roomId, r, r.now);
}
