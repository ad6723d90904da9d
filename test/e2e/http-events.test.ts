// GET /v1/events against real `dagbot node` processes: a client that drops and resumes with
// Last-Event-ID gets every event of the log once, across a leader change and a restart of the node it
// reads from (on SQLite and on PostgreSQL); a client past retention gets a snapshot; a run filter; a
// client that stops reading is dropped with a message saying where to resume, and resumes there.
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { StoreKind, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { READ_TOKEN, SseClient, call, startHttpNode } from "../support/http-client.js";
import { waitFor } from "../support/store-wait.js";

requireBuild();

const auth = { authorization: `Bearer ${READ_TOKEN}` };

async function publishAndRun(api: HttpNode, id: string): Promise<string> {
  const pub = await call(api.base, "POST", "/v1/dags", {
    body: {
      document: {
        id,
        tasks: [
          { id: "a", action: "echo", args: { message: id } },
          { id: "b", action: "echo", args: { message: "b" }, needs: ["a"] },
        ],
      },
    },
  });
  expect(pub.status, pub.text).toBe(201);
  const confirm = await call(api.base, "POST", `/v1/runs/${id}/confirm`);
  expect(confirm.status, confirm.text).toBe(200);
  return pub.body.run.runId as string;
}

async function waitRunEnded(store: Store, id: string): Promise<void> {
  await waitFor(
    `${id} succeeded`,
    () => store.getRun(ROOM, id),
    (r) => r?.status === "succeeded",
    { timeoutMs: 20_000 },
  );
}

/** Waits until the client has an event with this kind (and run), returning the events so far. */
async function waitForEvent(client: SseClient, kind: string, runId?: string): Promise<void> {
  await waitFor(
    `event ${kind}${runId === undefined ? "" : ` of ${runId}`}`,
    () => client.events.some((e) => e.data?.kind === kind && (runId === undefined || e.data.runId === runId)),
    (found) => found,
    { timeoutMs: 20_000 },
  );
}

async function withTarget(
  kind: StoreKind,
  label: string,
  body: (t: Target, store: Store) => Promise<void>,
): Promise<void> {
  const target = await createTarget(kind, label);
  const store = await target.open();
  let failed = true;
  try {
    await body(target, store);
    failed = false;
  } finally {
    await store.close();
    await target.cleanup(failed);
  }
}

describe.each(["sqlite", "postgres"] as const)("event stream on %s", (kind) => {
  it("resumes with Last-Event-ID after a drop, a leader change and a restart of its node: every event once, in order", async () => {
    await withTarget(kind, `http-events-${kind}`, async (target, store) => {
      let a = await startHttpNode(target, "a");
      const bConfig = writeNodeConfig(target, { nodeId: "b", ttl: "3s", renewEvery: "500ms" });
      const b = startNode(target, bConfig, "b");
      try {
        await waitFor(
          "a leads",
          () => store.getLease(ROOM),
          (l) => l?.holder?.nodeId === "a",
          { timeoutMs: 15_000 },
        );
        const first = new SseClient(a.port, "/v1/events?after=0", auth);
        const run1 = await publishAndRun(a, "one");
        await waitRunEnded(store, "one");
        await waitForEvent(first, "run.succeeded", run1);
        expect(first.status).toBe(200);
        first.close();
        const seen = first.seqs();

        // While the client is away: another run, then a's graceful stop hands the room to b, and a
        // comes back (a new boot) behind b.
        const run2 = await publishAndRun(a, "two");
        await waitRunEnded(store, "two");
        a.node.kill("SIGTERM");
        await a.node.exited;
        await waitFor(
          "b leads",
          () => store.getLease(ROOM),
          (l) => l?.holder?.nodeId === "b",
          { timeoutMs: 15_000 },
        );
        a = await startHttpNode(target, "a");
        const run3 = await publishAndRun(a, "three");
        await waitRunEnded(store, "three");

        const second = new SseClient(a.port, "/v1/events", { ...auth, "last-event-id": String(seen.at(-1)) });
        await waitForEvent(second, "run.succeeded", run3);
        second.close();
        // A log line first (no snapshot), each named by its kind so EventSource listeners by kind work.
        expect(second.events[0]?.event).toBe(second.events[0]?.data.kind);
        expect(second.events.every((e) => e.event === e.data.kind)).toBe(true);
        const got = [...seen, ...second.seqs()];
        const log = (await allEvents(store)).map((e) => e.seq).filter((s) => s <= got.at(-1)!);
        expect(got).toEqual(log);
        // The stream's lines are the log's lines.
        const byKind = second.events.map((e) => e.data.kind);
        expect(byKind).toContain("lease.acquired");
        expect(second.events.some((e) => e.data.runId === run2)).toBe(true);
      } finally {
        await killAll([a.node, b]);
      }
    });
  }, 90_000);
});

describe("event stream positions", () => {
  it("gives a snapshot first to a client without a position or past retention, then live events; filters by run", async () => {
    await withTarget("sqlite", "http-events-snapshot", async (target, store) => {
      const a = await startHttpNode(target, "a");
      try {
        await waitFor(
          "a leads",
          () => store.getLease(ROOM),
          (l) => l?.holder?.nodeId === "a",
          { timeoutMs: 15_000 },
        );
        const run1 = await publishAndRun(a, "old");
        await waitRunEnded(store, "old");

        const fresh = new SseClient(a.port, "/v1/events", auth);
        await waitFor(
          "snapshot",
          () => fresh.events.length,
          (n) => n >= 1,
        );
        const snap = fresh.events[0]!;
        expect(snap.event).toBe("snapshot");
        const log0 = await allEvents(store);
        const ended = log0.find((e) => e.kind === "run.succeeded" && e.runId === run1)!.seq;
        // The snapshot's id is the log's head when it was taken: the run's end is in it.
        expect(snap.id).toBeGreaterThanOrEqual(ended);
        expect(snap.id).toBeLessThanOrEqual(log0.at(-1)!.seq);
        expect(snap.data.runs.map((r: any) => r.run.dagId)).toEqual(["old"]);

        // What retention does to a finished run's lines, done to the file: the client's last event is gone.
        const events = await allEvents(store);
        const cut = events[Math.floor(events.length / 2)]!.seq;
        const db = new Database(target.store.slice("sqlite:".length));
        db.prepare("DELETE FROM events WHERE seq <= ?").run(cut);
        db.close();
        const behind = new SseClient(a.port, "/v1/events", { ...auth, "last-event-id": String(cut - 1) });
        await waitFor(
          "snapshot",
          () => behind.events.length,
          (n) => n >= 1,
        );
        expect(behind.events[0]!.event).toBe("snapshot");
        const at = behind.events[0]!.id!;

        const run2 = await publishAndRun(a, "new");
        await waitForEvent(behind, "run.succeeded", run2);
        await waitForEvent(fresh, "run.succeeded", run2);
        const live = behind.seqs();
        expect(live[0]).toBeGreaterThan(at);
        const log = (await allEvents(store)).map((e) => e.seq).filter((s) => s > at && s <= live.at(-1)!);
        expect(live).toEqual(log);

        const filtered = new SseClient(a.port, `/v1/events?after=0&run=${run2}`, auth);
        await waitForEvent(filtered, "run.succeeded", run2);
        expect(filtered.events.every((e) => e.data.runId === run2)).toBe(true);
        const runLog = (await allEvents(store)).filter((e) => e.runId === run2).map((e) => e.seq);
        expect(filtered.seqs()).toEqual(runLog.filter((s) => s <= filtered.seqs().at(-1)!));
        expect(run1).not.toBe(run2);

        // Inbox lines never carry a command's result (a reply can quote task output).
        expect(
          fresh.events
            .filter((e) => e.data?.kind === "inbox.handled")
            .every((e) => e.data.data.result === undefined),
        ).toBe(true);

        const bad = await call(a.base, "GET", "/v1/events", {
          token: READ_TOKEN,
          headers: { "last-event-id": "abc" },
        });
        expect(bad.status).toBe(400);
        expect(bad.contentType).toMatch(/problem\+json/);
        expect((await call(a.base, "GET", "/v1/events", { token: null })).status).toBe(401);
        for (const c of [fresh, behind, filtered]) c.close();
      } finally {
        await killAll([a.node]);
      }
    });
  }, 60_000);

  it("drops a client that stops reading, telling it where to resume; resuming there loses nothing", async () => {
    await withTarget("sqlite", "http-events-slow", async (target, store) => {
      const a = await startHttpNode(target, "a", { extra: 'sse_buffer = "16KiB"' });
      try {
        await waitFor(
          "a leads",
          () => store.getLease(ROOM),
          (l) => l?.holder?.nodeId === "a",
          { timeoutMs: 15_000 },
        );
        const slow = new SseClient(a.port, "/v1/events?after=0", auth);
        await waitFor(
          "connected",
          () => slow.status,
          (s) => s === 200,
        );
        slow.pause();
        // Log lines, many and fast: chat messages that are not commands, as intake would store them.
        let n = 0;
        await waitFor(
          "the slow client dropped",
          async () => {
            for (let i = 0; i < 300; i += 1) {
              n += 1;
              await store.insertInboxEvent({
                eventId: `$filler-${n}`,
                roomId: ROOM,
                sender: "@someone:example.org",
                originServerTs: await store.now(),
                content: { msgtype: "m.text", body: `just chatting ${"x".repeat(200)} ${n}` },
                seenBy: "test",
              });
            }
            return (await call(a.base, "GET", "/metrics", { token: READ_TOKEN })).text;
          },
          (text) => /dagbot_event_stream_dropped 1/.test(text),
          { timeoutMs: 60_000, intervalMs: 1 },
        );
        const fast = new SseClient(a.port, "/v1/events?after=0", auth);
        slow.resume();
        await waitFor(
          "the drop message",
          () => slow.closed,
          (c) => c,
          { timeoutMs: 20_000 },
        );
        const dropped = slow.events.at(-1)!;
        expect(dropped.event).toBe("dropped");
        expect(dropped.data.reason).toBe("slow-client");
        const got = slow.seqs();
        expect(dropped.data.resumeAfter).toBe(got.at(-1));
        expect(dropped.data.hint).toContain(`Last-Event-ID: ${got.at(-1)}`);

        const again = new SseClient(a.port, "/v1/events", {
          ...auth,
          "last-event-id": String(dropped.data.resumeAfter),
        });
        const head = (await allEvents(store)).at(-1)!.seq;
        await waitFor(
          "caught up",
          () => again.seqs().at(-1) ?? 0,
          (s) => s >= head,
          { timeoutMs: 30_000 },
        );
        const all = [...got, ...again.seqs()];
        const log = (await allEvents(store)).map((e) => e.seq).filter((s) => s <= all.at(-1)!);
        expect(all).toEqual(log);
        // A client that keeps reading is not dropped.
        await waitFor(
          "fast caught up",
          () => fast.seqs().at(-1) ?? 0,
          (s) => s >= head,
          { timeoutMs: 30_000 },
        );
        expect(fast.closed).toBe(false);
        expect(fast.events.some((e) => e.event === "dropped")).toBe(false);
        again.close();
        fast.close();
      } finally {
        await killAll([a.node]);
      }
    });
  }, 120_000);
});
