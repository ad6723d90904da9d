/**
 * The leader's outbox sender for one room (docs/architecture.md §4): takes pending outbox rows in order and
 * sends each under its own transaction id, so a retry is deduplicated by the homeserver; an edit's
 * `replacesTxnId` is resolved to the event id its original was sent as; every mark is fenced by the
 * leader's term. Status-card edits (rows with a coalesce key) go out at most once per
 * `editIntervalMs` per card; while one waits, newer edits supersede it in the store.
 *
 * Transaction ids are scoped to a device, and every node has its own, so a new leader could post
 * again what its predecessor sent just before dying. Every message therefore carries its txnId in
 * its content (TXN_CONTENT_KEY), and a new leader first looks in the room's recent history for the
 * pending rows it inherited and marks the ones it finds as sent.
 */
import type { Clock } from "../ports/clock.js";
import type { Logger } from "../ports/logger.js";
import type { ChangeFeed, LeaderFence, OutboxMessage, OutboxStore } from "../ports/store.js";
import { isChatSendError } from "../ports/chat.js";
import { isConflict } from "../ports/errors.js";
import type { PictureEvent, PictureMaker } from "./pictures.js";
import { PICTURE_REQUEST_TYPE, pictureFailureContent, readPictureRequest } from "./render/pictures.js";
import { FALLBACK_TXN_KEY, THREAD_ROOT_TXN_KEY } from "./render/notice.js";
import { Waker, wakeOnChange } from "./wake.js";
import { CHAT_PASS_BACKOFF, backoffMs } from "../domain/backoff.js";

/** Custom content key holding the outbox txnId of every message the fleet sends. */
export const TXN_CONTENT_KEY = "org.dagbot.txn";

/** What the outbox needs from the chat: raw sends with a txnId, and a look at recent history. */
export interface OutboxTransport {
  /** Idempotent per txnId (same device); throws ChatSendError when it did not happen. */
  sendEvent(
    roomId: string,
    eventType: string,
    content: Record<string, unknown>,
    txnId: string,
  ): Promise<string>;
  /**
   * The events of the room sent since `sinceMs` (homeserver time) whose TXN_CONTENT_KEY is one of
   * `txnIds`: txnId → event id. Looks back a bounded distance.
   */
  findSent(roomId: string, txnIds: ReadonlySet<string>, sinceMs: number): Promise<Map<string, string>>;
}

export interface OutboxLoopOptions {
  /** Minimum time between two sends of one card (its coalesce key). Default 2 s. */
  editIntervalMs?: number;
  /** Rows read per pass. */
  batchSize?: number;
  /** A pass with nothing announced, for what no change tells (a card edit becoming due is timed). */
  safetyTickMs?: number;
}

export interface OutboxLoopDeps {
  store: Pick<OutboxStore, "pendingOutbox" | "markOutboxSent" | "markOutboxFailed" | "getOutbox"> &
    ChangeFeed;
  transport: OutboxTransport;
  clock: Clock;
  logger: Logger;
  /** Observes each failed pass that was not a conflict (metrics). */
  onStoreError?: () => void;
  /** Draws and uploads `!dag graph` pictures; without it a picture request is answered with a notice. */
  pictures?: PictureMaker;
}

const DEFAULTS = { editIntervalMs: 2_000, batchSize: 50, safetyTickMs: 5_000 };
/** How far back a new leader looks for messages its predecessor may have sent (store vs homeserver clocks). */
const RECOVERY_SLACK_MS = 5 * 60_000;

/** Sends the room's outbox until `signal` aborts. Never throws: failures back off and retry. */
export async function runOutboxLoop(
  deps: OutboxLoopDeps,
  fence: LeaderFence,
  signal: AbortSignal,
  options: OutboxLoopOptions = {},
): Promise<void> {
  const o = { ...DEFAULTS, ...options };
  const log = deps.logger.child({ room: fence.roomId, term: fence.term, component: "outbox" });
  const waker = new Waker(deps.clock, 0);
  const unsubscribe = wakeOnChange(deps.store, waker, ["outbox"], [fence.roomId]);
  /** Per card (coalesce key, or the card's own txnId): monotonic time of its last send. */
  const lastSent = new Map<string, number>();
  /** Pictures being drawn and uploaded beside the pass, by txnId: they never hold up the rows after them. */
  const pictures = new Map<string, Promise<void>>();
  let recovered = false;
  let failures = 0;
  try {
    while (!signal.aborted) {
      let waitMs = o.safetyTickMs;
      try {
        if (!recovered) {
          await recoverSent(deps, fence, log);
          recovered = true;
        }
        const nextDue = await sendPass(deps, fence, signal, o, lastSent, log, (row) => {
          if (pictures.has(row.txnId)) return;
          // Its mark in the store wakes this loop through the change feed.
          const job = sendPicture(deps, fence, row, log).finally(() => pictures.delete(row.txnId));
          pictures.set(row.txnId, job);
        });
        failures = 0;
        if (nextDue !== null) waitMs = Math.min(waitMs, Math.max(0, nextDue - deps.clock.monotonicMs()));
      } catch (err) {
        failures += 1;
        waitMs = backoffMs(CHAT_PASS_BACKOFF, failures);
        if (isConflict(err)) {
          // Deposed, or the row moved under us: the lease keeper ends this loop when leadership is gone.
          log.debug({ reason: err.message }, "outbox write rejected");
        } else {
          deps.onStoreError?.();
          log.warn({ err: String(err), retryInMs: waitMs }, "outbox pass failed");
        }
      }
      if (signal.aborted) break;
      if (failures > 0) await deps.clock.sleep(waitMs, signal);
      else await waker.wait(waitMs, signal);
    }
  } finally {
    unsubscribe();
    await Promise.all(pictures.values());
  }
}

/** Marks as sent the inherited pending rows that a previous leader did send (found by their txnId). */
async function recoverSent(deps: OutboxLoopDeps, fence: LeaderFence, log: Logger): Promise<void> {
  const pending = await deps.store.pendingOutbox(fence, 500);
  if (pending.length === 0) return;
  const since = Math.min(...pending.map((m) => m.createdAt)) - RECOVERY_SLACK_MS;
  const found = await deps.transport.findSent(fence.roomId, new Set(pending.map((m) => m.txnId)), since);
  for (const [txnId, eventId] of found) {
    await deps.store.markOutboxSent(fence, txnId, eventId);
    log.info({ txn: txnId, event: eventId }, "inherited message was already sent");
  }
}

/**
 * One pass over the pending rows. Returns the monotonic time when a held-back card edit becomes
 * due, or null when none waits.
 */
async function sendPass(
  deps: OutboxLoopDeps,
  fence: LeaderFence,
  signal: AbortSignal,
  o: typeof DEFAULTS,
  lastSent: Map<string, number>,
  log: Logger,
  startPicture: (row: OutboxMessage) => void,
): Promise<number | null> {
  const rows = await deps.store.pendingOutbox(fence, o.batchSize);
  let nextDue: number | null = null;
  for (const row of rows) {
    if (signal.aborted) break;
    if (row.eventType === PICTURE_REQUEST_TYPE) {
      startPicture(row);
      continue;
    }
    const card = row.coalesceKey ?? row.txnId;
    const last = lastSent.get(card);
    if (row.replacesTxnId && last !== undefined && deps.clock.monotonicMs() < last + o.editIntervalMs) {
      nextDue = Math.min(nextDue ?? Infinity, last + o.editIntervalMs);
      continue;
    }
    const content = await contentToSend(deps, fence, row, log);
    if (content === null) continue;
    let eventId: string;
    try {
      eventId = await deps.transport.sendEvent(row.roomId, row.eventType, content, row.txnId);
    } catch (err) {
      if (isChatSendError(err) && !err.retryable) {
        await deps.store.markOutboxFailed(fence, row.txnId, err.message);
        log.warn({ txn: row.txnId, err: err.message }, "message refused by the homeserver");
        continue;
      }
      throw err;
    }
    await deps.store.markOutboxSent(fence, row.txnId, eventId);
    lastSent.set(card, deps.clock.monotonicMs());
    log.debug({ txn: row.txnId, event: eventId }, "sent");
  }
  return nextDue;
}

/** The content as sent: our txnId added, an edit pointed at its original. Null: skip this row for now. */
async function contentToSend(
  deps: OutboxLoopDeps,
  fence: LeaderFence,
  row: OutboxMessage,
  log: Logger,
): Promise<Record<string, unknown> | null> {
  const resolved = await withFallback(deps, row.content);
  if (resolved === null) return null;
  const content: Record<string, unknown> = withMentions(row.eventType, {
    ...resolved,
    [TXN_CONTENT_KEY]: row.txnId,
  });
  if (!row.replacesTxnId) return content;
  const original = await deps.store.getOutbox(row.replacesTxnId);
  if (original?.sentEventId) {
    const relation = content["m.relates_to"];
    content["m.relates_to"] = {
      ...(relation !== null && typeof relation === "object" ? relation : {}),
      rel_type: "m.replace",
      event_id: original.sentEventId,
    };
    return content;
  }
  // Its original is still on its way (it is older, so it goes first): wait for it.
  if (original?.status === "pending") return null;
  const why = original === null ? "its original is not in the outbox" : `its original was ${original.status}`;
  await deps.store.markOutboxFailed(fence, row.txnId, `cannot edit: ${why}`);
  log.warn({ txn: row.txnId, replaces: row.replacesTxnId }, `edit dropped: ${why}`);
  return null;
}

/**
 * Draws, uploads and sends one `!dag graph` picture under its row's txnId. What cannot be drawn or
 * uploaded was already turned into a notice by the picture maker; a send the homeserver refuses
 * marks the row failed; anything else leaves it pending for the next pass.
 */
async function sendPicture(
  deps: OutboxLoopDeps,
  fence: LeaderFence,
  row: OutboxMessage,
  log: Logger,
): Promise<void> {
  try {
    const request = readPictureRequest(row.content);
    if (request === null) {
      await deps.store.markOutboxFailed(fence, row.txnId, "malformed picture request");
      return;
    }
    const event: PictureEvent =
      deps.pictures === undefined
        ? pictureFailureContent(request.dagId, "this node cannot draw pictures", request.relation)
        : await deps.pictures(request, row.roomId);
    const resolved = await withFallback(deps, { ...event.content, ...fallbackOf(row.content) });
    // Its fallback target is still on its way (older, so it goes first): draw again on a later pass.
    if (resolved === null) return;
    const content = withMentions(event.eventType, { ...resolved, [TXN_CONTENT_KEY]: row.txnId });
    let eventId: string;
    try {
      eventId = await deps.transport.sendEvent(row.roomId, event.eventType, content, row.txnId);
    } catch (err) {
      if (isChatSendError(err) && !err.retryable) {
        await deps.store.markOutboxFailed(fence, row.txnId, err.message);
        log.warn({ txn: row.txnId, err: err.message }, "picture refused by the homeserver");
        return;
      }
      throw err;
    }
    await deps.store.markOutboxSent(fence, row.txnId, eventId);
    log.debug({ txn: row.txnId, event: eventId }, "picture sent");
  } catch (err) {
    if (isConflict(err)) log.debug({ txn: row.txnId, reason: err.message }, "picture mark rejected");
    else log.warn({ txn: row.txnId, err: String(err) }, "picture not sent; retrying on a later pass");
  }
}

/** The picture request's thread root and fallback target, carried over to the picture (or its failure notice). */
function fallbackOf(content: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of [THREAD_ROOT_TXN_KEY, FALLBACK_TXN_KEY]) {
    const txn = content[key];
    if (typeof txn === "string") out[key] = txn;
  }
  return out;
}

/**
 * A thread message's reply fallback (render/notice.ts FALLBACK_TXN_KEY) pointed at the event its
 * target message was sent as: `m.in_reply_to` with `is_falling_back`, so clients without threads
 * show it as a reply to that bot message. Null while the target is still pending; a target that was
 * never sent leaves the message without a fallback.
 */
async function withFallback(
  deps: OutboxLoopDeps,
  withRoot: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  const content = await withThreadRoot(deps, withRoot);
  if (content === null) return null;
  const txn = content[FALLBACK_TXN_KEY];
  if (txn === undefined) return content;
  const { [FALLBACK_TXN_KEY]: _, ...rest } = content;
  const target = typeof txn === "string" ? await deps.store.getOutbox(txn) : null;
  if (target?.status === "pending") return null;
  const relation = rest["m.relates_to"];
  if (target?.sentEventId == null || relation === null || typeof relation !== "object") return rest;
  return {
    ...rest,
    "m.relates_to": {
      ...relation,
      is_falling_back: true,
      "m.in_reply_to": { event_id: target.sentEventId },
    },
  };
}

/**
 * A message without m.mentions gets an empty one (and so does an edit's new content): then no
 * client or server looks for names or `@room` in its text, and nobody is pinged by what the bot
 * quotes. Whoever means to mention someone says so in m.mentions.
 */
function withMentions(eventType: string, content: Record<string, unknown>): Record<string, unknown> {
  if (eventType !== "m.room.message") return content;
  const out = "m.mentions" in content ? content : { ...content, "m.mentions": {} };
  const inner = out["m.new_content"];
  if (inner !== null && typeof inner === "object" && !("m.mentions" in inner))
    return { ...out, "m.new_content": { ...inner, "m.mentions": {} } };
  return out;
}

/**
 * A message in the thread of a card (render/notice.ts THREAD_ROOT_TXN_KEY: a run without a publish
 * message, whose card is its thread's root) gets the card's event id as its thread root. Null while
 * the card is still pending (it is older, so it goes first); a card that was never sent leaves the
 * message in the main timeline, without the thread relation.
 */
async function withThreadRoot(
  deps: OutboxLoopDeps,
  content: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  const txn = content[THREAD_ROOT_TXN_KEY];
  if (txn === undefined) return content;
  const { [THREAD_ROOT_TXN_KEY]: _, ...rest } = content;
  const root = typeof txn === "string" ? await deps.store.getOutbox(txn) : null;
  if (root?.status === "pending") return null;
  const relation = rest["m.relates_to"];
  if (root?.sentEventId == null || relation === null || typeof relation !== "object") {
    const { "m.relates_to": _relation, [FALLBACK_TXN_KEY]: _fallback, ...plain } = rest;
    return plain;
  }
  return { ...rest, "m.relates_to": { ...relation, event_id: root.sentEventId } };
}
