/** The inbox (processed_events) on PostgreSQL: insert-or-ignore by event id, the leader's ordered take, fenced marks. */
import type {
  InboxEvent,
  InboxEventInput,
  InboxHandling,
  LeaderFence,
  OutboxMessageInput,
} from "../../ports/store.js";
import { handlingAfter } from "../../domain/inbox-handling.js";
import type { Db, Tx } from "./db.js";
import { explainMiss, fenceCte, fenceParams, fencedRead, LOG_CTES } from "./guards.js";
import { json, NOW, sessionKey } from "./sql.js";
import { enqueue } from "../store-common/ops/outbox.js";
import { markHandled } from "../store-common/ops/inbox-handled.js";
import { runScript } from "./script-driver.js";
import { INBOX_COLUMNS, toInbox } from "./rows.js";

export async function insertInboxEvent(db: Db, e: InboxEventInput): Promise<"inserted" | "duplicate"> {
  // ON CONFLICT DO NOTHING waits for a concurrent inserter of the same id to commit: one winner.
  const rows = await db.one(
    "insert inbox event",
    `WITH ins AS (
       INSERT INTO processed_events (event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at)
       VALUES ($2::text, $3::text, $4::text, $5::bigint, $6::jsonb, $7::text, 'new', ${NOW})
       ON CONFLICT (event_id) DO NOTHING
       RETURNING event_id, room_id, sender),
     src AS (
       SELECT room_id, 1 AS ord, 'inbox.inserted' AS kind, NULL::text AS run_id, NULL::text AS task_id,
              NULL::bigint AS term, $7::text AS actor,
              jsonb_build_object('eventId', event_id, 'sender', sender) AS data FROM ins),
     ${LOG_CTES}
     SELECT 1, pg_notify('dagbot', 'inbox:' || room_id) FROM ins`,
    [db.clockParam(), e.eventId, e.roomId, e.sender, e.originServerTs, json(e.content), e.seenBy],
  );
  if (rows.length === 0) return "duplicate";
  db.committed("inbox", e.roomId);
  return "inserted";
}

export async function nextInboxEvent(db: Db, fence: LeaderFence): Promise<InboxEvent | null> {
  const rows = await fencedRead(
    db,
    "next inbox event",
    fence,
    `SELECT ${INBOX_COLUMNS} FROM processed_events WHERE room_id = $2::text AND status IN ('new','handled')
      ORDER BY origin_server_ts, event_id LIMIT 1`,
    [],
  );
  return rows[0] === undefined ? null : toInbox(rows[0]);
}

const FOUND_SQL = 'SELECT status, room_id AS "roomId" FROM processed_events WHERE event_id = $1';

/**
 * new → handled inside the caller's fenced transaction, so a command's effect and its mark commit
 * together. ConflictError when the row is no longer new: the command must not take effect twice.
 */
export async function markHandledInTx(
  tx: Tx,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
): Promise<void> {
  await runScript(tx, markHandled(fence, eventId, result));
}

export async function markInboxHandled(
  db: Db,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
  options: { content?: Record<string, unknown> } = {},
): Promise<void> {
  const rows = await db.one(
    "mark inbox handled",
    `WITH ${fenceCte(2)},
     up AS (
       UPDATE processed_events SET status = 'handled', result = $7::jsonb, handled_term = $5::bigint, handled_at = ${NOW},
              content = coalesce($9::jsonb, content)
        WHERE event_id = $6::text AND room_id = $2::text AND status = 'new' AND EXISTS (SELECT 1 FROM fence)
        RETURNING room_id, event_id),
     src AS (
       SELECT room_id, 1 AS ord, 'inbox.handled' AS kind, NULL::text AS run_id, NULL::text AS task_id,
              $5::bigint AS term, $8::text AS actor,
              jsonb_build_object('eventId', event_id, 'result', $7::jsonb) AS data FROM up),
     ${LOG_CTES}
     SELECT 1, pg_notify('dagbot', 'inbox:' || room_id) FROM up`,
    [
      db.clockParam(),
      ...fenceParams(fence),
      eventId,
      json(result),
      sessionKey(fence.session),
      options.content === undefined ? null : json(options.content),
    ],
  );
  if (rows.length === 0)
    throw await explainMiss(
      db,
      db.pool,
      "mark inbox handled",
      fence,
      { eventId },
      { roomId: fence.roomId, status: "new" },
      FOUND_SQL,
      [eventId],
    );
  db.committed("inbox", fence.roomId);
}

/** See InboxStore.startInboxHandling: a fenced transaction that commits before the command runs. */
export async function startInboxHandling(
  db: Db,
  fence: LeaderFence,
  eventId: string,
): Promise<InboxHandling> {
  return db.tx("start inbox handling", async (tx) => {
    await db.lockFence(tx, "start inbox handling", fence);
    const { rows } = await tx.query<{ handling_term: string | null; handling_losses: number }>(
      `SELECT handling_term, handling_losses FROM processed_events
        WHERE event_id = $1 AND room_id = $2 AND status = 'new' FOR UPDATE`,
      [eventId, fence.roomId],
    );
    const row = rows[0];
    if (row === undefined)
      throw await explainMiss(
        db,
        tx.client,
        "start inbox handling",
        null,
        { eventId },
        { roomId: fence.roomId, status: "new" },
        FOUND_SQL,
        [eventId],
      );
    const before = row.handling_term === null ? null : Number(row.handling_term);
    const { term: startedTerm, losses } = handlingAfter(before, row.handling_losses, fence.term);
    if (startedTerm === before) return { losses };
    await tx.query(
      "UPDATE processed_events SET handling_term = $1::bigint, handling_losses = $2::integer WHERE event_id = $3",
      [startedTerm, losses, eventId],
    );
    if (losses > row.handling_losses) {
      tx.log(fence.roomId, {
        kind: "inbox.abandoned",
        term: fence.term,
        actor: sessionKey(fence.session),
        data: { eventId, startedTerm: before, losses },
      });
    }
    return { losses };
  });
}

export async function markInboxReplied(
  db: Db,
  fence: LeaderFence,
  eventId: string,
  replies: OutboxMessageInput[],
): Promise<void> {
  await db.tx("mark inbox replied", async (tx) => {
    await db.lockFence(tx, "mark inbox replied", fence);
    const { rowCount } = await tx.query(
      "UPDATE processed_events SET status = 'replied' WHERE event_id = $1 AND room_id = $2 AND status = 'handled'",
      [eventId, fence.roomId],
    );
    if (rowCount !== 1)
      throw await explainMiss(
        db,
        tx.client,
        "mark inbox replied",
        null,
        { eventId },
        { roomId: fence.roomId, status: "handled" },
        FOUND_SQL,
        [eventId],
      );
    await runScript(tx, enqueue(fence, replies));
    tx.log(fence.roomId, {
      kind: "inbox.replied",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { eventId, replies: replies.map((r) => r.txnId) },
    });
    tx.touch("inbox", fence.roomId);
  });
}

export async function getInboxEvent(db: Db, eventId: string): Promise<InboxEvent | null> {
  const rows = await db.one(
    "get inbox event",
    `SELECT ${INBOX_COLUMNS} FROM processed_events WHERE event_id = $1`,
    [eventId],
  );
  return rows[0] === undefined ? null : toInbox(rows[0]);
}

export async function latestInboxEvent(db: Db, roomId: string): Promise<InboxEvent | null> {
  const rows = await db.one(
    "latest inbox event",
    `SELECT ${INBOX_COLUMNS} FROM processed_events WHERE room_id = $1
      ORDER BY origin_server_ts DESC, event_id DESC LIMIT 1`,
    [roomId],
  );
  return rows[0] === undefined ? null : toInbox(rows[0]);
}
