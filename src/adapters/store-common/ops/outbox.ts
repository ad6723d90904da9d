/**
 * The outbox, written once for both stores: insert-or-ignore by transaction id, coalescing of
 * unsent edits, fenced marks (docs/architecture.md §4).
 */
import { ConflictError, NotFoundError } from "../../../ports/errors.js";
import type { LeaderFence, OutboxMessage, OutboxMessageInput } from "../../../ports/store.js";
import { checkMessageRooms } from "../checks.js";
import { OUTBOX_COLUMNS, sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, rows, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";

const INSERT = sql("an outbox message")`
  INSERT INTO outbox (txn_id, room_id, event_type, content, replaces_txn_id, coalesce_key, status, created_at, updated_at)
  VALUES (${p.text("txnId")}, ${p.text("roomId")}, ${p.text("eventType")}, ${p.json("content")}, ${p.text("replaces")},
          ${p.text("coalesceKey")}, 'pending', ${p.now}, ${p.now})
  ON CONFLICT (txn_id) DO NOTHING RETURNING seq`;

// The newest row of a coalesce key supersedes every older pending row with that key.
const SUPERSEDE = sql("older unsent edits of the same message")`
  UPDATE outbox SET status = 'superseded', updated_at = ${p.now}
   WHERE room_id = ${p.text("roomId")} AND coalesce_key = ${p.text("coalesceKey")} AND status = 'pending'
     AND seq < ${p.int("seq")}`;

const PENDING = sql("a room's unsent messages")`
  SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE room_id = ${p.text("roomId")} AND status = 'pending' ORDER BY seq ${p.limit("limit")}`;

const MARK = sql("an outbox message, sent or failed")`
  UPDATE outbox SET status = ${p.text("to")}, sent_event_id = coalesce(${p.text("sentEventId")}, sent_event_id),
         last_error = coalesce(${p.text("error")}, last_error), attempts = attempts + 1, updated_at = ${p.now}
   WHERE txn_id = ${p.text("txnId")} AND room_id = ${p.text("roomId")} AND status${p.inList("from")}`;

const FOUND = sql(
  "an outbox message's status",
)`SELECT status, room_id FROM outbox WHERE txn_id = ${p.text("txnId")}`;

const ONE = sql("an outbox message")`SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE txn_id = ${p.text("txnId")}`;

/** Inside the caller's fenced transaction. */
export function* enqueue(fence: LeaderFence, messages: readonly OutboxMessageInput[]): Script<void> {
  checkMessageRooms(fence, messages);
  for (const m of messages) {
    const inserted = yield* row<{ seq: number }>(INSERT, {
      txnId: m.txnId,
      roomId: m.roomId,
      eventType: m.eventType,
      content: m.content,
      replaces: m.replacesTxnId ?? null,
      coalesceKey: m.coalesceKey ?? null,
    });
    if (inserted === undefined) continue;
    const superseded =
      m.coalesceKey === undefined || m.coalesceKey === null
        ? 0
        : yield* run(SUPERSEDE, { roomId: m.roomId, coalesceKey: m.coalesceKey, seq: Number(inserted.seq) });
    yield* log(m.roomId, {
      kind: "outbox.enqueued",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { txnId: m.txnId, superseded },
    });
  }
  if (messages.length > 0) yield* touch("outbox", fence.roomId);
}

export function* enqueueOutbox(fence: LeaderFence, messages: readonly OutboxMessageInput[]): Script<void> {
  yield* holdFence("enqueue outbox", fence);
  yield* enqueue(fence, messages);
}

/** A read under the fence: only the room's leader sends. */
export function* pendingOutbox(fence: LeaderFence, limit: number): Script<OutboxMessage[]> {
  const m = yield* mappers();
  yield* holdFence("pending outbox", fence);
  const found = yield* rows(PENDING, { roomId: fence.roomId, limit: Math.max(0, Math.floor(limit)) });
  return found.map(m.toOutbox);
}

function* mark(
  operation: string,
  fence: LeaderFence,
  txnId: string,
  to: "sent" | "failed",
  from: readonly string[],
  set: { sentEventId?: string; error?: string },
): Script<void> {
  yield* holdFence(operation, fence);
  const changed = yield* run(MARK, {
    to,
    sentEventId: set.sentEventId ?? null,
    error: set.error ?? null,
    txnId,
    roomId: fence.roomId,
    from,
  });
  if (changed === 0) {
    const found = yield* row<{ status: string; room_id: string }>(FOUND, { txnId });
    if (found === undefined) throw new NotFoundError(operation, { txnId });
    throw new ConflictError(
      operation,
      { txnId, roomId: fence.roomId, status: from },
      { roomId: found.room_id, status: found.status },
    );
  }
  yield* log(fence.roomId, {
    kind: `outbox.${to}`,
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { txnId, ...set },
  });
  yield* touch("outbox", fence.roomId);
}

/** A row superseded while its send was in flight was still sent: keep its event id for later edits. */
export const markOutboxSent = (fence: LeaderFence, txnId: string, sentEventId: string): Script<void> =>
  mark("mark outbox sent", fence, txnId, "sent", ["pending", "superseded"], { sentEventId });

export const markOutboxFailed = (fence: LeaderFence, txnId: string, error: string): Script<void> =>
  mark("mark outbox failed", fence, txnId, "failed", ["pending"], { error });

export function* getOutbox(txnId: string): Script<OutboxMessage | null> {
  const m = yield* mappers();
  const r = yield* row(ONE, { txnId });
  return r === undefined ? null : m.toOutbox(r);
}
