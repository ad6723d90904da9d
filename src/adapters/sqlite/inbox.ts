/** The inbox (processed_events) on SQLite: insert-or-ignore by event id, the leader's ordered take, fenced marks. */
import type {
  InboxEvent,
  InboxEventInput,
  InboxHandling,
  LeaderFence,
  OutboxMessageInput,
} from "../../ports/store.js";
import type { SqliteConnection, Tx } from "./connection.js";
import { sessionKey } from "./connection.js";
import { INBOX_COLUMNS, toInbox } from "./rows.js";
import { handlingAfter } from "../../domain/inbox-handling.js";
import { explainMiss, markHandled } from "../store-common/ops/inbox-handled.js";
import { enqueue } from "../store-common/ops/outbox.js";
import { runScript } from "./script-driver.js";

/**
 * The leader's take: served by the partial index of rows still to handle (docs/query-plans.md).
 * INDEXED BY because without ANALYZE statistics the planner prefers processed_events_room, which
 * walks every handled row of the room's history (reading through each row's content to its
 * status) on every take.
 */
export const NEXT_INBOX_SQL = `SELECT ${INBOX_COLUMNS} FROM processed_events INDEXED BY processed_events_open
  WHERE room_id = ? AND status IN ('new','handled')
  ORDER BY origin_server_ts, event_id LIMIT 1`;

export function insertInboxEvent(c: SqliteConnection, e: InboxEventInput): Promise<"inserted" | "duplicate"> {
  return c.write("insert inbox event", (tx) => {
    const changed = c.run(
      `INSERT INTO processed_events (event_id, room_id, sender, origin_server_ts, content, seen_by, status, received_at)
       VALUES (?, ?, ?, ?, ?, ?, 'new', ?) ON CONFLICT (event_id) DO NOTHING`,
      e.eventId,
      e.roomId,
      e.sender,
      e.originServerTs,
      JSON.stringify(e.content),
      e.seenBy,
      tx.now,
    );
    if (changed === 0) return "duplicate";
    tx.log({
      roomId: e.roomId,
      kind: "inbox.inserted",
      actor: e.seenBy,
      data: { eventId: e.eventId, sender: e.sender },
    });
    tx.touch("inbox", e.roomId);
    return "inserted";
  });
}

export function nextInboxEvent(c: SqliteConnection, fence: LeaderFence): Promise<InboxEvent | null> {
  return c.read("next inbox event", (now) => {
    c.checkFence("next inbox event", fence, now);
    const row = c.get(NEXT_INBOX_SQL, fence.roomId);
    return row === undefined ? null : toInbox(row);
  });
}

/**
 * new → handled inside the caller's transaction (a command's effect and its mark commit together).
 * ConflictError when the row is already handled: the command must not take effect twice.
 */
export function markHandledInTx(
  c: SqliteConnection,
  tx: Tx,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
): void {
  runScript(c, tx, markHandled(fence, eventId, result));
}

export function markInboxHandled(
  c: SqliteConnection,
  fence: LeaderFence,
  eventId: string,
  result: Record<string, unknown>,
  options: { content?: Record<string, unknown> } = {},
): Promise<void> {
  return c.write("mark inbox handled", (tx) => {
    c.checkFence("mark inbox handled", fence, tx.now);
    markHandledInTx(c, tx, fence, eventId, result);
    if (options.content !== undefined) {
      c.run(
        "UPDATE processed_events SET content = ? WHERE event_id = ?",
        JSON.stringify(options.content),
        eventId,
      );
    }
  });
}

/** See InboxStore.startInboxHandling: one fenced write that commits before the command runs. */
export function startInboxHandling(
  c: SqliteConnection,
  fence: LeaderFence,
  eventId: string,
): Promise<InboxHandling> {
  return c.write("start inbox handling", (tx) => {
    c.checkFence("start inbox handling", fence, tx.now);
    const row = c.get<{ handling_term: number | null; handling_losses: number }>(
      `SELECT handling_term, handling_losses FROM processed_events
        WHERE event_id = ? AND room_id = ? AND status = 'new'`,
      eventId,
      fence.roomId,
    );
    if (row === undefined) throw runScript(c, tx, explainMiss("start inbox handling", fence, eventId, "new"));
    const { term: startedTerm, losses } = handlingAfter(row.handling_term, row.handling_losses, fence.term);
    if (startedTerm === row.handling_term) return { losses };
    c.run(
      "UPDATE processed_events SET handling_term = ?, handling_losses = ? WHERE event_id = ?",
      startedTerm,
      losses,
      eventId,
    );
    if (losses > row.handling_losses) {
      tx.log({
        roomId: fence.roomId,
        kind: "inbox.abandoned",
        term: fence.term,
        actor: sessionKey(fence.session),
        data: { eventId, startedTerm: row.handling_term, losses },
      });
    }
    return { losses };
  });
}

export function markInboxReplied(
  c: SqliteConnection,
  fence: LeaderFence,
  eventId: string,
  replies: OutboxMessageInput[],
): Promise<void> {
  return c.write("mark inbox replied", (tx) => {
    c.checkFence("mark inbox replied", fence, tx.now);
    const changed = c.run(
      "UPDATE processed_events SET status = 'replied' WHERE event_id = ? AND room_id = ? AND status = 'handled'",
      eventId,
      fence.roomId,
    );
    if (changed === 0) throw runScript(c, tx, explainMiss("mark inbox replied", fence, eventId, "handled"));
    runScript(c, tx, enqueue(fence, replies));
    tx.log({
      roomId: fence.roomId,
      kind: "inbox.replied",
      term: fence.term,
      actor: sessionKey(fence.session),
      data: { eventId, replies: replies.map((r) => r.txnId) },
    });
    tx.touch("inbox", fence.roomId);
  });
}

export function getInboxEvent(c: SqliteConnection, eventId: string): Promise<InboxEvent | null> {
  return c.read("get inbox event", () => {
    const row = c.get(`SELECT ${INBOX_COLUMNS} FROM processed_events WHERE event_id = ?`, eventId);
    return row === undefined ? null : toInbox(row);
  });
}

export function latestInboxEvent(c: SqliteConnection, roomId: string): Promise<InboxEvent | null> {
  return c.read("latest inbox event", () => {
    const row = c.get(
      `SELECT ${INBOX_COLUMNS} FROM processed_events WHERE room_id = ? ORDER BY origin_server_ts DESC, event_id DESC LIMIT 1`,
      roomId,
    );
    return row === undefined ? null : toInbox(row);
  });
}
