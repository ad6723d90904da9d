/** The outbox on PostgreSQL: insert-or-ignore by transaction id, coalescing of unsent edits, fenced marks. */
import type { LeaderFence, OutboxMessage, OutboxMessageInput } from "../../ports/store.js";
import type { Db, Tx } from "./db.js";
import { explainMiss, fenceCte, fenceParams, fencedRead, LOG_CTES } from "./guards.js";
import { cleanText, json, NOW, sessionKey } from "./sql.js";
import { OUTBOX_COLUMNS, toOutbox } from "./rows.js";
import { checkMessageRooms } from "../store-common/checks.js";

/** Inside the caller's fenced transaction: two statements for any number of messages. */
export async function enqueueInTx(tx: Tx, fence: LeaderFence, messages: OutboxMessageInput[]): Promise<void> {
  if (messages.length === 0) return;
  checkMessageRooms(fence, messages);
  // ORDER BY n: identity values are drawn in row order, so seq keeps the order of the batch.
  const { rows } = await tx.query<{ seq: number; txn_id: string; coalesce_key: string | null }>(
    `INSERT INTO outbox (txn_id, room_id, event_type, content, replaces_txn_id, coalesce_key, status, created_at, updated_at)
     SELECT m.txn_id, $2::text, m.event_type, m.content, m.replaces, m.coalesce_key, 'pending', ${NOW}, ${NOW}
       FROM unnest($3::text[], $4::text[], $5::jsonb[], $6::text[], $7::text[])
            WITH ORDINALITY AS m(txn_id, event_type, content, replaces, coalesce_key, n)
      ORDER BY m.n
     ON CONFLICT (txn_id) DO NOTHING
     RETURNING seq, txn_id, coalesce_key`,
    [
      tx.clockParam,
      fence.roomId,
      messages.map((m) => m.txnId),
      messages.map((m) => m.eventType),
      messages.map((m) => json(m.content)),
      messages.map((m) => m.replacesTxnId ?? null),
      messages.map((m) => m.coalesceKey ?? null),
    ],
  );
  // The newest inserted row of each coalesce key supersedes every older pending row with that key.
  const newest = new Map<string, number>();
  for (const r of rows)
    if (r.coalesce_key !== null) newest.set(r.coalesce_key, Math.max(newest.get(r.coalesce_key) ?? 0, r.seq));
  const superseded = new Map<string, number>();
  if (newest.size > 0) {
    const sup = await tx.query<{ coalesce_key: string }>(
      `UPDATE outbox o SET status = 'superseded', updated_at = ${NOW}
         FROM unnest($2::text[], $3::bigint[]) AS k(key, newest)
        WHERE o.room_id = $4::text AND o.status = 'pending' AND o.coalesce_key = k.key AND o.seq < k.newest
       RETURNING o.coalesce_key`,
      [tx.clockParam, [...newest.keys()], [...newest.values()], fence.roomId],
    );
    for (const r of sup.rows) superseded.set(r.coalesce_key, (superseded.get(r.coalesce_key) ?? 0) + 1);
  }
  for (const r of rows) {
    const isNewest = r.coalesce_key !== null && newest.get(r.coalesce_key) === r.seq;
    tx.log(fence.roomId, {
      kind: "outbox.enqueued",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { txnId: r.txn_id, superseded: isNewest ? (superseded.get(r.coalesce_key ?? "") ?? 0) : 0 },
    });
  }
  tx.touch("outbox", fence.roomId);
}

export async function enqueueOutbox(
  db: Db,
  fence: LeaderFence,
  messages: OutboxMessageInput[],
): Promise<void> {
  await db.tx("enqueue outbox", async (tx) => {
    await db.lockFence(tx, "enqueue outbox", fence);
    await enqueueInTx(tx, fence, messages);
  });
}

export async function pendingOutbox(db: Db, fence: LeaderFence, limit: number): Promise<OutboxMessage[]> {
  const rows = await fencedRead(
    db,
    "pending outbox",
    fence,
    `SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE room_id = $2::text AND status = 'pending' ORDER BY seq LIMIT $6::int`,
    [Math.max(0, Math.floor(limit))],
  );
  return rows.map(toOutbox);
}

async function mark(
  db: Db,
  operation: string,
  fence: LeaderFence,
  txnId: string,
  to: "sent" | "failed",
  from: readonly string[],
  set: { sentEventId?: string; error?: string },
): Promise<void> {
  const rows = await db.one(
    operation,
    `WITH ${fenceCte(2)},
     up AS (
       UPDATE outbox SET status = $7::text, sent_event_id = coalesce($8::text, sent_event_id),
              last_error = coalesce($9::text, last_error), attempts = attempts + 1, updated_at = ${NOW}
        WHERE txn_id = $6::text AND room_id = $2::text AND status = ANY($10::text[]) AND EXISTS (SELECT 1 FROM fence)
        RETURNING room_id, txn_id),
     src AS (
       SELECT room_id, 1 AS ord, 'outbox.' || $7::text AS kind, NULL::text AS run_id, NULL::text AS task_id,
              $5::bigint AS term, $11::text AS actor, $12::jsonb AS data FROM up),
     ${LOG_CTES}
     SELECT 1, pg_notify('dagbot', 'outbox:' || room_id) FROM up`,
    [
      db.clockParam(),
      ...fenceParams(fence),
      txnId,
      to,
      set.sentEventId ?? null,
      set.error === undefined ? null : cleanText(set.error),
      from,
      sessionKey(fence.session),
      json({ txnId, ...set }),
    ],
  );
  if (rows.length === 0)
    throw await explainMiss(
      db,
      db.pool,
      operation,
      fence,
      { txnId },
      { roomId: fence.roomId, status: from },
      `SELECT status, room_id AS "roomId" FROM outbox WHERE txn_id = $1`,
      [txnId],
    );
  db.committed("outbox", fence.roomId);
}

export function markOutboxSent(
  db: Db,
  fence: LeaderFence,
  txnId: string,
  sentEventId: string,
): Promise<void> {
  // A row superseded while its send was in flight was still sent: keep its event id for later edits.
  return mark(db, "mark outbox sent", fence, txnId, "sent", ["pending", "superseded"], { sentEventId });
}

export function markOutboxFailed(db: Db, fence: LeaderFence, txnId: string, error: string): Promise<void> {
  return mark(db, "mark outbox failed", fence, txnId, "failed", ["pending"], { error });
}

export async function getOutbox(db: Db, txnId: string): Promise<OutboxMessage | null> {
  const rows = await db.one("get outbox", `SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE txn_id = $1`, [txnId]);
  return rows[0] === undefined ? null : toOutbox(rows[0]);
}
