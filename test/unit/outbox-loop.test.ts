/**
 * The leader's outbox sender over a real SQLite store and a recording chat transport: order and
 * txnIds, edits pointed at their original, pacing of card edits (held, then superseded), refusals,
 * retries, and a new leader recognising what its predecessor already sent.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { runOutboxLoop, TXN_CONTENT_KEY, type OutboxLoopOptions } from "../../src/app/outbox-loop.js";
import type { LeaderFence, OutboxMessageInput, Store } from "../../src/ports/store.js";
import { FALLBACK_TXN_KEY } from "../../src/app/render/notice.js";
import { RecordingTransport } from "../support/bot-transport-fake.js";
import { sqliteTestDb, type SqliteTestDb } from "../support/sqlite-harness.js";
import { waitFor } from "../support/store-wait.js";

let db: SqliteTestDb;
let store: Store;
let failed = false;
let roomCounter = 0;
const loops: { abort: AbortController; done: Promise<void> }[] = [];

beforeAll(async () => {
  db = sqliteTestDb("outbox-loop");
  store = await db.open();
});
afterEach(async (ctx) => {
  if (ctx.task.result?.state === "fail") failed = true;
  for (const l of loops.splice(0)) {
    l.abort.abort();
    await l.done;
  }
});
afterAll(async () => {
  await store.close();
  db.cleanup(failed);
});

async function leadNewRoom(): Promise<LeaderFence> {
  const roomId = `!room${++roomCounter}:hs`;
  const lease = await store.acquireLease(roomId, { nodeId: "leader", bootId: "1" }, 600_000);
  return { roomId, session: lease.session, term: lease.term };
}

function start(fence: LeaderFence, transport: RecordingTransport, options: OutboxLoopOptions = {}): void {
  const abort = new AbortController();
  const done = runOutboxLoop(
    { store, transport, clock: systemClock, logger: silentLogger() },
    fence,
    abort.signal,
    { editIntervalMs: 0, ...options },
  );
  loops.push({ abort, done });
}

const msg = (
  fence: LeaderFence,
  txnId: string,
  extra: Partial<OutboxMessageInput> = {},
): OutboxMessageInput => ({
  txnId,
  roomId: fence.roomId,
  eventType: "m.room.message",
  content: { msgtype: "m.notice", body: txnId },
  ...extra,
});

const edit = (fence: LeaderFence, txnId: string, original: string): OutboxMessageInput =>
  msg(fence, txnId, {
    content: { msgtype: "m.notice", body: `* ${txnId}`, "m.relates_to": { rel_type: "m.replace" } },
    replacesTxnId: original,
    coalesceKey: original,
  });

const statusOf = (txnId: string) =>
  waitFor(
    `outbox ${txnId}`,
    () => store.getOutbox(txnId),
    (m) => m !== null,
  );
const untilStatus = (txnId: string, status: string) =>
  waitFor(
    `${txnId} ${status}`,
    () => store.getOutbox(txnId),
    (m) => m?.status === status,
    { timeoutMs: 10_000 },
  );

describe("runOutboxLoop", () => {
  it("sends rows in order under their own txnId, tagged with it, and records the event ids", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    await store.enqueueOutbox(fence, [msg(fence, "a"), msg(fence, "b"), msg(fence, "c")]);
    start(fence, transport);
    await untilStatus("c", "sent");
    expect(transport.sentTxnIds()).toEqual(["a", "b", "c"]);
    expect(transport.sends[0]?.content).toMatchObject({ body: "a", [TXN_CONTENT_KEY]: "a" });
    expect((await store.getOutbox("a"))?.sentEventId).toBe("$event-1");
  });

  it("points an edit at the event its original was sent as", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    await store.enqueueOutbox(fence, [msg(fence, "card"), edit(fence, "card.1", "card")]);
    start(fence, transport);
    await untilStatus("card.1", "sent");
    const cardEvent = (await store.getOutbox("card"))?.sentEventId;
    expect(transport.sends[1]?.content["m.relates_to"]).toEqual({
      rel_type: "m.replace",
      event_id: cardEvent,
    });
  });

  it("fills a thread message's reply fallback with the event its target was sent as, once that is sent", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    transport.failTimes("fb-ack", 2);
    const inThread = (txnId: string, target: string) =>
      msg(fence, txnId, {
        content: {
          msgtype: "m.notice",
          body: txnId,
          "m.relates_to": { rel_type: "m.thread", event_id: "$publish" },
          [FALLBACK_TXN_KEY]: target,
        },
      });
    // The card names the acknowledgement; one message names a row that was never queued.
    await store.enqueueOutbox(fence, [
      msg(fence, "fb-ack"),
      inThread("fb-card", "fb-ack"),
      inThread("fb-lost", "fb-nowhere"),
    ]);
    start(fence, transport);
    await untilStatus("fb-lost", "sent");
    await untilStatus("fb-card", "sent");
    // The card waited for the acknowledgement it points at (sent after two failed tries).
    expect(transport.sentTxnIds()).toEqual(["fb-ack", "fb-card", "fb-lost"]);
    const ack = (await store.getOutbox("fb-ack"))?.sentEventId;
    const card = transport.sends.find((x) => x.txnId === "fb-card")!.content;
    expect(card["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: "$publish",
      is_falling_back: true,
      "m.in_reply_to": { event_id: ack },
    });
    expect(card[FALLBACK_TXN_KEY]).toBeUndefined();
    const lost = transport.sends.find((x) => x.txnId === "fb-lost")!.content;
    expect(lost["m.relates_to"]).toEqual({ rel_type: "m.thread", event_id: "$publish" });
    expect(lost[FALLBACK_TXN_KEY]).toBeUndefined();
  });

  it("holds a card's edits back for the interval: newer ones supersede them, other messages pass", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    start(fence, transport, { editIntervalMs: 600_000 });
    await store.enqueueOutbox(fence, [msg(fence, "card2")]);
    await untilStatus("card2", "sent");
    await store.enqueueOutbox(fence, [edit(fence, "card2.1", "card2")]);
    await store.enqueueOutbox(fence, [edit(fence, "card2.2", "card2"), msg(fence, "reply-after")]);
    // The reply comes after both edits in the outbox, yet goes out while they wait.
    await untilStatus("reply-after", "sent");
    expect((await store.getOutbox("card2.1"))?.status).toBe("superseded");
    expect((await store.getOutbox("card2.2"))?.status).toBe("pending");
    expect(transport.sentTxnIds()).toEqual(["card2", "reply-after"]);
  });

  it("fails a refused message and its edits, and goes on with the rest", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    transport.refuse("bad");
    await store.enqueueOutbox(fence, [msg(fence, "bad"), edit(fence, "bad.1", "bad"), msg(fence, "good")]);
    start(fence, transport);
    await untilStatus("good", "sent");
    await untilStatus("bad.1", "failed");
    expect((await store.getOutbox("bad"))?.status).toBe("failed");
    expect(transport.sentTxnIds()).toEqual(["good"]);
  });

  it("retries a message the homeserver could not take, always under the same txnId", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    transport.failTimes("flaky", 2);
    await store.enqueueOutbox(fence, [msg(fence, "flaky")]);
    start(fence, transport);
    await untilStatus("flaky", "sent");
    expect(transport.attempts.get("flaky")).toBe(3);
    expect(transport.sentTxnIds()).toEqual(["flaky"]);
  });

  it("a new leader marks what its predecessor already sent, and sends only the rest", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    await store.enqueueOutbox(fence, [msg(fence, "inherited"), msg(fence, "fresh")]);
    transport.alreadySent.set("inherited", "$sent-before-the-crash");
    start(fence, transport);
    await untilStatus("fresh", "sent");
    expect(await statusOf("inherited")).toMatchObject({
      status: "sent",
      sentEventId: "$sent-before-the-crash",
    });
    expect(transport.sentTxnIds()).toEqual(["fresh"]);
  });
});
