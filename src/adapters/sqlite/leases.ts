/** Room leases (leadership) on SQLite: acquire where free or expired with term + 1, renew and release fenced. */
import { ConflictError } from "../../ports/errors.js";
import type { LeaderFence, LeaseState, Session } from "../../ports/store.js";
import type { SqliteConnection } from "./connection.js";
import { sessionKey } from "./connection.js";
import { checkLeaseTtl } from "../store-common/checks.js";
import { holderKey, leaseFromRow } from "../store-common/records.js";

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

export function acquireLease(
  c: SqliteConnection,
  roomId: string,
  session: Session,
  ttlMs: number,
): Promise<LeaderFence & { expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  return c.write("acquire lease", (tx) => {
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
      if (changed !== 1) throw new ConflictError("acquire lease", { free: true }, found(row));
    } else {
      throw new ConflictError("acquire lease", { freeOrExpiredAt: tx.now }, found(row));
    }
    const actor = sessionKey(session);
    tx.log({ roomId, kind: "lease.acquired", term, actor, data: { expiresAt, previous: found(row) } });
    tx.touch("lease", roomId);
    return { roomId, session, term, expiresAt };
  });
}

export function renewLease(
  c: SqliteConnection,
  fence: LeaderFence,
  ttlMs: number,
): Promise<{ expiresAt: number }> {
  checkLeaseTtl(ttlMs);
  return c.write("renew lease", (tx) => {
    // Not logged: a renewal every few seconds would drown the log and changes no holder or term.
    c.checkFence("renew lease", fence, tx.now);
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
    c.checkFence("release lease", fence, tx.now);
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
