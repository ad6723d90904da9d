/**
 * The inbox (processed_events), written once for both stores: insert-or-ignore by event id, the
 * leader's ordered take, fenced marks (docs/architecture.md §4). The mark new → handled that a
 * command's own transaction makes is `markHandled` (inbox-handled.ts).
 */
import { handlingAfter } from "../../../domain/inbox-handling.js";
import type {
  InboxEvent,
  InboxEventInput,
  InboxHandling,
  LeaderFence,
  OutboxMessageInput,
} from "../../../ports/store.js";
import { INBOX_COLUMNS, sessionKey } from "../records.js";
import type { Script } from "../script.js";
import { log, mappers, p, row, run, sql, touch } from "../script.js";
import { holdFence } from "./fence.js";
import { explainMiss, markHandled } from "./inbox-handled.js";
import { enqueue } from "./outbox.js";

// ON CONFLICT DO NOTHING waits for a concurrent inserter of the same id to commit: one winner.
const INSERT = sql("an inbox row")`
  INSERT INTO processed_events (event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at)
  VALUES (${p.text("eventId")}, ${p.text("roomId")}, ${p.text("sender")}, ${p.int("originServerTs")},
          ${p.json("content")}, ${p.text("seenBy")}, 'new', ${p.now})
  ON CONFLICT (event_id) DO NOTHING`;

/**
 * The leader's take: served by the partial index of rows still to handle (docs/query-plans.md).
 * SQLite: INDEXED BY, because without ANALYZE statistics its planner prefers processed_events_room,
 * which walks every handled row of the room's history on every take.
 */
export const NEXT = sql("the next inbox row to handle")`
  SELECT ${INBOX_COLUMNS} FROM processed_events${p.only({ sqlite: " INDEXED BY processed_events_open" })}
   WHERE room_id = ${p.text("roomId")} AND status IN ('new','handled')
   ORDER BY origin_server_ts, event_id LIMIT 1`;

const CONTENT = sql("an inbox row's content, replaced")`
  UPDATE processed_events SET content = ${p.json("content")} WHERE event_id = ${p.text("eventId")}`;

// Locked on PostgreSQL: two handlers of one row count their losses one after the other.
const HANDLING = sql("an inbox row's handling")`
  SELECT handling_term, handling_losses FROM processed_events
   WHERE event_id = ${p.text("eventId")} AND room_id = ${p.text("roomId")} AND status = 'new'${p.only({ postgres: " FOR UPDATE" })}`;

const SET_HANDLING = sql("an inbox row's handling, set")`
  UPDATE processed_events SET handling_term = ${p.int("term")}, handling_losses = ${p.int("losses")}
   WHERE event_id = ${p.text("eventId")}`;

const REPLIED = sql("an inbox row, handled → replied")`
  UPDATE processed_events SET status = 'replied'
   WHERE event_id = ${p.text("eventId")} AND room_id = ${p.text("roomId")} AND status = 'handled'`;

const ONE = sql(
  "an inbox row",
)`SELECT ${INBOX_COLUMNS} FROM processed_events WHERE event_id = ${p.text("eventId")}`;

const LATEST = sql("a room's latest inbox row")`
  SELECT ${INBOX_COLUMNS} FROM processed_events WHERE room_id = ${p.text("roomId")}
   ORDER BY origin_server_ts DESC, event_id DESC LIMIT 1`;

export function* insertInboxEvent(e: InboxEventInput): Script<"inserted" | "duplicate"> {
  const changed = yield* run(INSERT, {
    eventId: e.eventId,
    roomId: e.roomId,
    sender: e.sender,
    originServerTs: e.originServerTs,
    content: e.content,
    seenBy: e.seenBy,
  });
  if (changed === 0) return "duplicate";
  yield* log(e.roomId, {
    kind: "inbox.inserted",
    term: null,
    actor: e.seenBy,
    data: { eventId: e.eventId, sender: e.sender },
  });
  yield* touch("inbox", e.roomId);
  return "inserted";
}

/** A read under the fence: only the room's leader takes commands. */
export function* nextInboxEvent(fence: LeaderFence): Script<InboxEvent | null> {
  const m = yield* mappers();
  yield* holdFence("next inbox event", fence);
  const r = yield* row(NEXT, { roomId: fence.roomId });
  return r === undefined ? null : m.toInbox(r);
}

export function* markInboxHandled(
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
  options: { content?: Record<string, unknown> } = {},
): Script<void> {
  yield* holdFence("mark inbox handled", fence);
  yield* markHandled(fence, eventId, result);
  if (options.content !== undefined) yield* run(CONTENT, { content: options.content, eventId });
}

/** See InboxStore.startInboxHandling: one fenced write that commits before the command runs. */
export function* startInboxHandling(fence: LeaderFence, eventId: string): Script<InboxHandling> {
  const operation = "start inbox handling";
  yield* holdFence(operation, fence);
  const r = yield* row<{ handling_term: number | string | null; handling_losses: number }>(HANDLING, {
    eventId,
    roomId: fence.roomId,
  });
  if (r === undefined) throw yield* explainMiss(operation, fence, eventId, "new");
  const before = r.handling_term === null ? null : Number(r.handling_term);
  const { term: startedTerm, losses } = handlingAfter(before, r.handling_losses, fence.term);
  if (startedTerm === before) return { losses };
  yield* run(SET_HANDLING, { term: startedTerm, losses, eventId });
  if (losses > r.handling_losses)
    yield* log(fence.roomId, {
      kind: "inbox.abandoned",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { eventId, startedTerm: before, losses },
    });
  return { losses };
}

export function* markInboxReplied(
  fence: LeaderFence,
  eventId: string,
  replies: readonly OutboxMessageInput[],
): Script<void> {
  const operation = "mark inbox replied";
  yield* holdFence(operation, fence);
  const changed = yield* run(REPLIED, { eventId, roomId: fence.roomId });
  if (changed === 0) throw yield* explainMiss(operation, fence, eventId, "handled");
  yield* enqueue(fence, replies);
  yield* log(fence.roomId, {
    kind: "inbox.replied",
    term: fence.term,
    actor: sessionKey(fence.session),
    data: { eventId, replies: replies.map((x) => x.txnId) },
  });
  yield* touch("inbox", fence.roomId);
}

export function* getInboxEvent(eventId: string): Script<InboxEvent | null> {
  const m = yield* mappers();
  const r = yield* row(ONE, { eventId });
  return r === undefined ? null : m.toInbox(r);
}

export function* latestInboxEvent(roomId: string): Script<InboxEvent | null> {
  const m = yield* mappers();
  const r = yield* row(LATEST, { roomId });
  return r === undefined ? null : m.toInbox(r);
}
