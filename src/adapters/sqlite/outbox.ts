/** The outbox on SQLite: insert-or-ignore by transaction id, coalescing of unsent edits, fenced marks. */
import { ConflictError, NotFoundError } from "../../ports/errors.js";
import type { LeaderFence, OutboxMessage, OutboxMessageInput } from "../../ports/store.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { LIMIT } from "./connection.js";
import { sessionKey } from "./connection.js";
import { OUTBOX_COLUMNS, toOutbox } from "./rows.js";
import { checkMessageRooms } from "../store-common/checks.js";

/** Inside the caller's (fenced) transaction. */
export function enqueueInTx(
  c: SqliteConnection,
  tx: Tx,
  fence: LeaderFence,
  messages: OutboxMessageInput[],
): void {
  checkMessageRooms(fence, messages);
  for (const m of messages) {
    const row = c.get<{ seq: number }>(
      `INSERT INTO outbox (txn_id, room_id, event_type, content, replaces_txn_id, coalesce_key, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (txn_id) DO NOTHING RETURNING seq`,
      m.txnId,
      m.roomId,
      m.eventType,
      JSON.stringify(m.content),
      m.replacesTxnId ?? null,
      m.coalesceKey ?? null,
      tx.now,
      tx.now,
    );
    if (row === undefined) continue;
    let superseded = 0;
    if (m.coalesceKey !== undefined && m.coalesceKey !== null) {
      superseded = c.run(
        `UPDATE outbox SET status = 'superseded', updated_at = ?
          WHERE room_id = ? AND coalesce_key = ? AND status = 'pending' AND seq < ?`,
        tx.now,
        m.roomId,
        m.coalesceKey,
        row.seq,
      );
    }
    tx.log({
      roomId: m.roomId,
      kind: "outbox.enqueued",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { txnId: m.txnId, superseded },
    });
  }
  if (messages.length > 0) tx.touch("outbox", fence.roomId);
}

export function enqueueOutbox(
  c: SqliteConnection,
  fence: LeaderFence,
  messages: OutboxMessageInput[],
): Promise<void> {
  return c.write("enqueue outbox", (tx) => {
    c.checkFence("enqueue outbox", fence, tx.now);
    enqueueInTx(c, tx, fence, messages);
  });
}

export function pendingOutbox(
  c: SqliteConnection,
  fence: LeaderFence,
  limit: number,
): Promise<OutboxMessage[]> {
  return c.read("pending outbox", (now) => {
    c.checkFence("pending outbox", fence, now);
    return c
      .all(
        `SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE room_id = ? AND status = 'pending' ORDER BY seq ${LIMIT}`,
        fence.roomId,
        limit,
      )
      .map(toOutbox);
  });
}

function mark(
  c: SqliteConnection,
  operation: string,
  fence: LeaderFence,
  txnId: string,
  to: "sent" | "failed",
  from: readonly string[],
  set: { sentEventId?: string; error?: string },
): Promise<void> {
  return c.write(operation, (tx) => {
    c.checkFence(operation, fence, tx.now);
    const changed = c.run(
      `UPDATE outbox SET status = ?, sent_event_id = COALESCE(?, sent_event_id), last_error = COALESCE(?, last_error),
              attempts = attempts + 1, updated_at = ?
        WHERE txn_id = ? AND room_id = ? AND status IN (SELECT value FROM json_each(?))`,
      to,
      set.sentEventId ?? null,
      set.error ?? null,
      tx.now,
      txnId,
      fence.roomId,
      JSON.stringify(from),
    );
    if (changed === 0) {
      const row = c.get<{ status: string; room_id: string }>(
        "SELECT status, room_id FROM outbox WHERE txn_id = ?",
        txnId,
      );
      if (row === undefined) throw new NotFoundError(operation, { txnId });
      throw new ConflictError(
        operation,
        { txnId, roomId: fence.roomId, status: from },
        { roomId: row.room_id, status: row.status },
      );
    }
    tx.log({
      roomId: fence.roomId,
      kind: `outbox.${to}`,
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { txnId, ...set },
    });
    tx.touch("outbox", fence.roomId);
  });
}

export function markOutboxSent(
  c: SqliteConnection,
  fence: LeaderFence,
  txnId: string,
  sentEventId: string,
): Promise<void> {
  // A row superseded while its send was in flight was still sent: record its event id for later edits.
  return mark(c, "mark outbox sent", fence, txnId, "sent", ["pending", "superseded"], { sentEventId });
}

export function markOutboxFailed(
  c: SqliteConnection,
  fence: LeaderFence,
  txnId: string,
  error: string,
): Promise<void> {
  return mark(c, "mark outbox failed", fence, txnId, "failed", ["pending"], { error });
}

export function getOutbox(c: SqliteConnection, txnId: string): Promise<OutboxMessage | null> {
  return c.read("get outbox", () => {
    const row = c.get(`SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE txn_id = ?`, txnId);
    return row === undefined ? null : toOutbox(row);
  });
}
