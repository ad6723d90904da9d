/** Room leases (leadership) on PostgreSQL: one statement each, judged by the rows it returns, on the store's clock. */
import { ConflictError } from "../../ports/errors.js";
import type { LeaderFence, LeaseState, Session } from "../../ports/store.js";
import type { Db } from "./db.js";
import { LOG_CTES } from "./guards.js";
import { checkLeaseTtl } from "../store-common/checks.js";
import { leaseFromRow } from "../store-common/records.js";
import { NOW, sessionKey } from "./sql.js";

const FENCED = `room_id = $2::text AND holder_node = $3::text AND holder_boot = $4::text AND term = $5::bigint
  AND expires_at > ${NOW}`;

export async function acquireLease(
  db: Db,
  roomId: string,
  session: Session,
  ttlMs: number,
): Promise<LeaderFence & { expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  // ON CONFLICT locks the existing row before judging it, so of N racers exactly one sees it free.
  const rows = await db.one<{ term: number; expires_at: number }>(
    "acquire lease",
    `WITH up AS (
       INSERT INTO room_leases AS l (room_id, holder_node, holder_boot, term, expires_at)
       VALUES ($2::text, $3::text, $4::text, 1, ${NOW} + $5::bigint)
       ON CONFLICT (room_id) DO UPDATE
         SET holder_node = excluded.holder_node, holder_boot = excluded.holder_boot,
             term = l.term + 1, expires_at = excluded.expires_at
         WHERE l.holder_node IS NULL OR l.expires_at <= ${NOW}
       RETURNING room_id, term, expires_at),
     src AS (
       SELECT room_id, 1 AS ord, 'lease.acquired' AS kind, NULL::text AS run_id, NULL::text AS task_id,
              term, $6::text AS actor, jsonb_build_object('expiresAt', expires_at) AS data FROM up),
     ${LOG_CTES}
     SELECT term, expires_at, pg_notify('dagbot', 'lease:' || $2::text) FROM up`,
    [db.clockParam(), roomId, session.nodeId, session.bootId, Math.ceil(ttlMs), sessionKey(session)],
  );
  const r = rows[0];
  if (r === undefined) {
    const found = await getLease(db, roomId);
    throw new ConflictError(
      "acquire lease",
      { roomId, freeOrExpired: true },
      found === null
        ? null
        : {
            holder: found.holder === null ? null : sessionKey(found.holder),
            term: found.term,
            expiresAt: found.expiresAt,
            now: found.now,
          },
    );
  }
  db.committed("lease", roomId);
  return { roomId, session, term: r.term, expiresAt: r.expires_at };
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
  if (r === undefined) throw await db.fenceConflict("renew lease", fence);
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
  if (rows.length === 0) throw await db.fenceConflict("release lease", fence);
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
