/** Room leases (leadership) on SQLite: acquire where free or expired with term + 1, renew and release fenced. */
import type { LeaderFence, LeaseState, LeaseSync, LeaseWish, Session } from "../../ports/store.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { sessionKey } from "./connection.js";
import { checkLeaseTtl } from "../store-common/checks.js";
import { acquiredFence } from "../../ports/lease-answer.js";
import { holderKey, leaseFromRow } from "../store-common/records.js";
import { checkFence } from "./script-driver.js";

interface LeaseRow {
  room_id: string;
  holder_node: string | null;
  holder_boot: string | null;
  term: number;
  expires_at: number;
}

const SELECT =
  "SELECT room_id, holder_node, holder_boot, term, expires_at FROM room_leases WHERE room_id = ?";

const found = (r: LeaseRow | undefined): Record<string, unknown> | null =>
  r === undefined
    ? null
    : {
        holder: holderKey(r.holder_node, r.holder_boot),
        term: r.term,
        expiresAt: r.expires_at,
      };

/** The answer for a room this write did not take or renew: the lease as found. */
const asFound = (
  roomId: string,
  row: LeaseRow | undefined,
  now: number,
  outcome: LeaseSync["outcome"],
): LeaseSync => ({
  roomId,
  outcome,
  holder: row?.holder_node == null ? null : { nodeId: row.holder_node, bootId: row.holder_boot ?? "" },
  term: row?.term ?? 0,
  expiresAt: row?.expires_at ?? 0,
  now,
});

/** Inside a write: take one room's lease where free or expired, else say who holds it. */
function acquireIn(c: SqliteConnection, tx: Tx, roomId: string, session: Session, ttlMs: number): LeaseSync {
  const row = c.get<LeaseRow>(SELECT, roomId);
  const expiresAt = tx.now + ttlMs;
  let term: number;
  if (row === undefined) {
    term = 1;
    c.run(
      "INSERT INTO room_leases (room_id, holder_node, holder_boot, term, expires_at) VALUES (?, ?, ?, ?, ?)",
      roomId,
      session.nodeId,
      session.bootId,
      term,
      expiresAt,
    );
  } else if (row.holder_node === null || row.expires_at <= tx.now) {
    term = row.term + 1;
    const changed = c.run(
      `UPDATE room_leases SET holder_node = ?, holder_boot = ?, term = ?, expires_at = ?
        WHERE room_id = ? AND term = ?`,
      session.nodeId,
      session.bootId,
      term,
      expiresAt,
      roomId,
      row.term,
    );
    // Inside BEGIN IMMEDIATE nobody moves the row between the read and the update.
    if (changed !== 1) return asFound(roomId, row, tx.now, "held");
  } else {
    return asFound(roomId, row, tx.now, "held");
  }
  const actor = sessionKey(session);
  tx.log({ roomId, kind: "lease.acquired", term, actor, data: { expiresAt, previous: found(row) } });
  tx.touch("lease", roomId);
  return { roomId, outcome: "acquired", holder: session, term, expiresAt, now: tx.now };
}

export async function acquireLease(
  c: SqliteConnection,
  roomId: string,
  session: Session,
  ttlMs: number,
): Promise<LeaderFence & { expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  const r = await c.write("acquire lease", (tx) => acquireIn(c, tx, roomId, session, ttlMs));
  return acquiredFence(roomId, session, r);
}

/** Every wish in one write transaction (SQLite's "one statement": one lock, one commit). */
export function syncLeases(
  c: SqliteConnection,
  session: Session,
  ttlMs: number,
  wishes: readonly LeaseWish[],
): Promise<LeaseSync[]> {
  checkLeaseTtl(ttlMs);
  if (wishes.length === 0) return Promise.resolve([]);
  if (new Set(wishes.map((w) => w.roomId)).size !== wishes.length)
    return Promise.reject(new RangeError("sync leases: a room is named twice"));
  return c.write("sync leases", (tx) =>
    wishes.map((w): LeaseSync => {
      if (w.term === null) return acquireIn(c, tx, w.roomId, session, ttlMs);
      const row = c.get<LeaseRow>(SELECT, w.roomId);
      const held =
        row !== undefined &&
        row.holder_node === session.nodeId &&
        row.holder_boot === session.bootId &&
        row.term === w.term &&
        row.expires_at > tx.now;
      if (!held) return asFound(w.roomId, row, tx.now, "lost");
      const expiresAt = tx.now + ttlMs;
      c.run(
        "UPDATE room_leases SET expires_at = ? WHERE room_id = ? AND term = ?",
        expiresAt,
        w.roomId,
        w.term,
      );
      return { roomId: w.roomId, outcome: "renewed", holder: session, term: w.term, expiresAt, now: tx.now };
    }),
  );
}

export function renewLease(
  c: SqliteConnection,
  fence: LeaderFence,
  ttlMs: number,
): Promise<{ expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  return c.write("renew lease", (tx) => {
    // Not logged: a renewal every few seconds would drown the log and changes no holder or term.
    checkFence(c, tx, "renew lease", fence);
    const expiresAt = tx.now + ttlMs;
    c.run(
      "UPDATE room_leases SET expires_at = ? WHERE room_id = ? AND term = ?",
      expiresAt,
      fence.roomId,
      fence.term,
    );
    return { expiresAt };
  });
}

export function releaseLease(c: SqliteConnection, fence: LeaderFence): Promise<void> {
  return c.write("release lease", (tx) => {
    checkFence(c, tx, "release lease", fence);
    // Keep the term: the next holder's term must still be higher than every earlier one.
    c.run(
      "UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = ? WHERE room_id = ? AND term = ?",
      tx.now,
      fence.roomId,
      fence.term,
    );
    tx.log({
      roomId: fence.roomId,
      kind: "lease.released",
      term: fence.term,
      actor: sessionKey(fence.session),
    });
    tx.touch("lease", fence.roomId);
  });
}

export function getLease(c: SqliteConnection, roomId: string): Promise<LeaseState | null> {
  return c.read("get lease", (now) => {
    const row = c.get<LeaseRow>(SELECT, roomId);
    return row === undefined ? null : leaseFromRow(roomId, row, now);
  });
}
