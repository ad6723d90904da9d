/**
 * `!dag graph` pictures in the leader's outbox, over a real SQLite store and a recording transport:
 * a picture being drawn never holds up the rows queued after it (the card), it goes out under the
 * command's reply txnId when ready, and a node that cannot draw answers with a notice.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { runOutboxLoop, TXN_CONTENT_KEY } from "../../src/app/outbox-loop.js";
import type { PictureEvent, PictureMaker } from "../../src/app/pictures.js";
import { pictureRequestMessage } from "../../src/app/render/pictures.js";
import type { RunSummary } from "../../src/app/commands/outcome.js";
import type { LeaderFence, Store } from "../../src/ports/store.js";
import { RecordingTransport } from "../support/bot-transport-fake.js";
import { sqliteTestDb, type SqliteTestDb } from "../support/sqlite-harness.js";
import { waitFor } from "../support/store-wait.js";

let db: SqliteTestDb;
let store: Store;
let failed = false;
let roomCounter = 0;
const loops: { abort: AbortController; done: Promise<void> }[] = [];

beforeAll(async () => {
  db = sqliteTestDb("outbox-pictures");
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
  const roomId = `!pictures${++roomCounter}:hs`;
  const lease = await store.acquireLease(roomId, { nodeId: "leader", bootId: "1" }, 600_000);
  return { roomId, session: lease.session, term: lease.term };
}

function start(fence: LeaderFence, transport: RecordingTransport, pictures?: PictureMaker): void {
  const abort = new AbortController();
  const deps = { store, transport, clock: systemClock, logger: silentLogger() };
  const done = runOutboxLoop(pictures ? { ...deps, pictures } : deps, fence, abort.signal, {
    editIntervalMs: 0,
  });
  loops.push({ abort, done });
}

const run: RunSummary = {
  runId: "0123abcd-0000-0000-0000-000000000000",
  dagId: "nightly",
  status: "running",
  description: null,
  publisher: "@alice:hs",
  confirmedBy: null,
  publishEventId: "$publish",
  confirmDeadline: null,
  createdAt: 0,
  updatedAt: 0,
  taskCount: 3,
};

const notice = (fence: LeaderFence, txnId: string) => ({
  txnId,
  roomId: fence.roomId,
  eventType: "m.room.message",
  content: { msgtype: "m.notice", body: txnId },
});

const sent = (txnId: string) =>
  waitFor(
    `${txnId} sent`,
    () => store.getOutbox(txnId),
    (m) => m?.status === "sent",
    { timeoutMs: 10_000 },
  );

describe("pictures in the outbox", () => {
  it("sends the rows after a picture while it is drawn, then the picture under the reply txnId", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    let finish!: (event: PictureEvent) => void;
    const drawing = new Promise<PictureEvent>((resolve) => (finish = resolve));
    let requests = 0;
    start(fence, transport, async (request) => {
      requests += 1;
      expect(request).toMatchObject({ runId: run.runId, dagId: "nightly" });
      return drawing;
    });
    const placement = { kind: "thread", root: "$publish", to: "$command" } as const;
    await store.enqueueOutbox(fence, [
      pictureRequestMessage(fence.roomId, "$command", run, placement),
      notice(fence, "card.edit"),
      notice(fence, "reply.other"),
    ]);
    await sent("reply.other");
    expect(transport.sentTxnIds()).toEqual(["card.edit", "reply.other"]);
    expect((await store.getOutbox("reply.$command"))?.status).toBe("pending");

    finish({
      eventType: "m.room.message",
      content: { msgtype: "m.image", body: "nightly", url: "mxc://hs/x" },
    });
    await sent("reply.$command");
    expect(transport.sentTxnIds()).toEqual(["card.edit", "reply.other", "reply.$command"]);
    const picture = transport.sends[2]!;
    expect(picture.eventType).toBe("m.room.message");
    expect(picture.content).toMatchObject({ msgtype: "m.image", [TXN_CONTENT_KEY]: "reply.$command" });
    // Drawn once, though several passes saw the pending row while it was being drawn.
    expect(requests).toBe(1);
  });

  it("answers with a notice in the run's thread when this node cannot draw", async () => {
    const fence = await leadNewRoom();
    const transport = new RecordingTransport();
    start(fence, transport);
    const placement = { kind: "thread", root: "$publish", to: "$cmd2" } as const;
    await store.enqueueOutbox(fence, [pictureRequestMessage(fence.roomId, "$cmd2", run, placement)]);
    await sent("reply.$cmd2");
    const content = transport.sends[0]!.content;
    expect(content).toMatchObject({
      msgtype: "m.notice",
      "m.relates_to": { rel_type: "m.thread", event_id: "$publish", "m.in_reply_to": { event_id: "$cmd2" } },
    });
    expect(String(content["body"])).toContain("No picture of `nightly`: this node cannot draw pictures");
  });
});
