/**
 * Room leases (leadership), written once for both stores (docs/architecture.md §3, "Lease"): take a
 * room's lease where it is free or expired with term + 1, renew it while the fence holds, release it
 * keeping its term, read it. On the store's clock. A node's acquires and renewals are one statement
 * (syncLeases), which on PostgreSQL also writes their log lines: the renewal is the
 * leader's hot path, one round trip.
 */
import type { LeaderFence, LeaseState, LeaseSync, LeaseWish, Session } from "../../../ports/store.js";
import { LOG_CTES } from "../postgres-text.js";
import { acquiredFence } from "../../../ports/lease-answer.js";
import { checkLeaseTtl } from "../checks.js";
import { leaseFromRow, sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, now, p, row, rows, sql, touch } from "../script.js";
import { FENCE_HOLDS, fenceConflict, fenceValues, LEASE_AS_FOUND, leaseHeldBy } from "./fence.js";

interface LeaseRow {
  room_id: string;
  holder_node: string | null;
  holder_boot: string | null;
  term: number;
  expires_at: number;
  now: number;
}

/** A wish's term, or null for an acquire: read per row by the upsert's judgement. */
const WANT = "(SELECT want FROM w WHERE w.room_id = l.room_id)";

/**
 * Every wish in one upsert: an acquire takes a row that is new, free or expired (term + 1); a renewal
 * extends a row the session holds under the wished term (the fence's condition) and never creates
 * one. ON CONFLICT locks the existing row before judging it, so of N racers exactly one takes it;
 * rooms go in room order so two nodes lock rows in the same order. It returns the rows it took.
 * On PostgreSQL the upsert is a CTE of one statement that also logs each acquire and
 * answers for every wish with the lease as found in its snapshot (`logged`: the log line is written).
 */
const SYNC = sql("a node's lease wishes")`
  WITH w AS (
    SELECT value ->> 'room' AS room_id, CAST(value ->> 'term' AS bigint) AS want
      FROM ${p.only({ sqlite: "json_each", postgres: "jsonb_array_elements" })}(${p.json("wishes")}))${p.only(
        {
          postgres: ",\n  up AS (",
        },
      )}
  INSERT INTO room_leases AS l (room_id, holder_node, holder_boot, term, expires_at)
  SELECT room_id, ${p.text("node")}, ${p.text("boot")}, 1, ${p.now} + ${p.int("ttl")} FROM w
   WHERE want IS NULL OR EXISTS (SELECT 1 FROM room_leases r WHERE r.room_id = w.room_id)
   ORDER BY room_id
  ON CONFLICT (room_id) DO UPDATE
     SET holder_node = excluded.holder_node, holder_boot = excluded.holder_boot,
         term = CASE WHEN ${WANT} IS NULL THEN l.term + 1 ELSE l.term END, expires_at = excluded.expires_at
   WHERE CASE WHEN ${WANT} IS NULL THEN l.holder_node IS NULL OR l.expires_at <= ${p.now}
         ELSE ${leaseHeldBy("l", { node: p.text("node"), boot: p.text("boot"), term: WANT })} END
  RETURNING room_id, 1 AS taken, term, expires_at, holder_node, holder_boot, ${p.now} AS now, 0 AS logged${p.only(
    {
      postgres: sql("the acquires logged, every wish answered")`),
  src AS (
    SELECT up.room_id, 1 AS ord, 'lease.acquired' AS kind, NULL::text AS run_id, NULL::text AS task_id,
           up.term, ${p.text("actor")} AS actor, jsonb_build_object('expiresAt', up.expires_at) AS data
      FROM up JOIN w USING (room_id) WHERE w.want IS NULL),
  ${LOG_CTES}
  SELECT w.room_id, up.room_id IS NOT NULL AS taken, coalesce(up.term, cur.term, 0) AS term,
         coalesce(up.expires_at, cur.expires_at, 0) AS expires_at, cur.holder_node, cur.holder_boot,
         ${p.now} AS now, up.room_id IS NOT NULL AS logged
    FROM w LEFT JOIN up ON up.room_id = w.room_id LEFT JOIN room_leases cur ON cur.room_id = w.room_id`,
    },
  )}`;

const FOUND = sql("rooms' leases, as found")`
  SELECT room_id, holder_node, holder_boot, term, expires_at, ${p.now} AS now
    FROM room_leases WHERE room_id${p.inList("rooms")}`;

// Not logged: a renewal every few seconds would drown the log, and it changes no holder or term.
const RENEW = sql("a lease renewed")`
  UPDATE room_leases SET expires_at = ${p.now} + ${p.int("ttl")} WHERE ${FENCE_HOLDS} RETURNING expires_at`;

// The term stays: the next holder's term must be higher than every earlier one. On PostgreSQL one
// statement that also logs (`logged`), as the node's lease wishes are.
const RELEASE = sql("a lease released")`
  ${p.only({ postgres: "WITH up AS (" })}UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = ${p.now}
   WHERE ${FENCE_HOLDS} RETURNING room_id, term, 0 AS logged${p.only({
     postgres: sql("the release logged")`),
  src AS (
    SELECT room_id, 1 AS ord, 'lease.released' AS kind, NULL::text AS run_id, NULL::text AS task_id,
           term, ${p.text("actor")} AS actor, '{}'::jsonb AS data FROM up),
  ${LOG_CTES}
  SELECT room_id, term, true AS logged FROM up`,
   })}`;

/**
 * Acquires and renewals of many rooms, judged as acquire and renew would judge each (the port's
 * syncLeases). Rooms the statement answered for but did not take are read from its snapshot; rooms
 * it did not answer for (SQLite's upsert returns only what it took) are read after it, in the same
 * write.
 */
export function* syncLeases(
  session: Session,
  ttlMs: number,
  wishes: readonly LeaseWish[],
): Script<LeaseSync[]> {
  checkLeaseTtl(ttlMs);
  if (wishes.length === 0) return [];
  if (new Set(wishes.map((w) => w.roomId)).size !== wishes.length)
    throw new RangeError("sync leases: a room is named twice");
  const answered = yield* rows<LeaseRow & { taken: unknown; logged: unknown }>(SYNC, {
    wishes: wishes.map((w) => ({ room: w.roomId, term: w.term })),
    node: session.nodeId,
    boot: session.bootId,
    ttl: Math.ceil(ttlMs),
    actor: sessionKey(session),
  });
  const byRoom = new Map<string, LeaseRow & { taken?: unknown; logged?: unknown }>(
    answered.map((r) => [r.room_id, r]),
  );
  const missing = wishes.filter((w) => !byRoom.has(w.roomId)).map((w) => w.roomId);
  if (missing.length > 0)
    for (const r of yield* rows<LeaseRow>(FOUND, { rooms: missing })) byRoom.set(r.room_id, r);
  const answers: LeaseSync[] = [];
  for (const w of wishes) {
    const r = byRoom.get(w.roomId);
    const outcome = w.term === null ? "held" : "lost";
    if (r === undefined) {
      answers.push({ roomId: w.roomId, outcome, holder: null, term: 0, expiresAt: 0, now: yield* now() });
      continue;
    }
    if (!r.taken) {
      answers.push({ ...leaseFromRow(w.roomId, r, Number(r.now)), outcome });
      continue;
    }
    const lease = {
      holder: session,
      term: Number(r.term),
      expiresAt: Number(r.expires_at),
      now: Number(r.now),
    };
    if (w.term !== null) {
      answers.push({ roomId: w.roomId, outcome: "renewed", ...lease });
      continue;
    }
    if (!r.logged)
      yield* log(w.roomId, {
        kind: "lease.acquired",
        term: lease.term,
        actor: sessionKey(session),
        data: { expiresAt: lease.expiresAt },
      });
    yield* touch("lease", w.roomId);
    answers.push({ roomId: w.roomId, outcome: "acquired", ...lease });
  }
  return answers;
}

/** Take one room's lease where free or expired: syncLeases of one acquire, answered as the port says. */
export function* acquireLease(
  roomId: string,
  session: Session,
  ttlMs: number,
): Script<LeaderFence & { expiresAt: number }> {
  const [r] = yield* syncLeases(session, ttlMs, [{ roomId, term: null }]);
  if (r === undefined) throw new Error("acquire lease: no answer for the room");
  return acquiredFence(roomId, session, r);
}

/** Extend the lease while the fence holds it: one statement; ConflictError with the lease as found. */
export function* renewLease(fence: LeaderFence, ttlMs: number): Script<{ expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  const r = yield* row<{ expires_at: number }>(RENEW, { ...fenceValues(fence), ttl: Math.ceil(ttlMs) });
  if (r === undefined) throw yield* fenceConflict("renew lease", fence);
  return { expiresAt: Number(r.expires_at) };
}

/** Free the lease at once (a graceful stop), fenced like every leader write. */
export function* releaseLease(fence: LeaderFence): Script<void> {
  const actor = sessionKey(fence.session);
  const r = yield* row<{ logged: unknown }>(RELEASE, { ...fenceValues(fence), actor });
  if (r === undefined) throw yield* fenceConflict("release lease", fence);
  if (!r.logged) yield* log(fence.roomId, { kind: "lease.released", term: fence.term, actor });
  yield* touch("lease", fence.roomId);
}

export function* getLease(roomId: string): Script<LeaseState | null> {
  const r = yield* row<Omit<LeaseRow, "room_id">>(LEASE_AS_FOUND, { roomId });
  return r === undefined ? null : leaseFromRow(roomId, r, Number(r.now));
}
