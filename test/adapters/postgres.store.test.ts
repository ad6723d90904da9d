/**
 * The Store contract against a real PostgreSQL server (one database per test file, kept if a test
 * fails), plus what only PostgreSQL has: LISTEN/NOTIFY and its reconnection, schemas, concurrent
 * migrators, NUL bytes that text and jsonb refuse, and a queue drained by 16 pooled connections.
 */
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LATEST_SCHEMA_VERSION } from "../../src/adapters/postgres/migrations.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import { StoreError } from "../../src/ports/errors.js";
import type { ChangeTopic, Store } from "../../src/ports/store.js";
import { describeStoreContract } from "../contracts/store.contract.js";
import { postgresHarness } from "../support/postgres-harness.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import {
  becomeLeader,
  cmd,
  dag,
  offer,
  ok,
  publishRunning,
  session,
  task,
} from "../support/store-fixtures.js";

const { create, capabilities } = postgresHarness();

describeStoreContract({ name: "postgres", create, capabilities });

describe("PostgreSQL store specifics", () => {
  let db: TestDatabase;
  let failed = false;
  const opened: Store[] = [];
  const open = async (options: Parameters<typeof openPostgresStore>[1] = {}): Promise<Store> => {
    const s = await openPostgresStore(db.url, { poolSize: 2, ...options });
    opened.push(s);
    return s;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterEach((test) => {
    if (test.task.result?.state === "fail") failed = true;
  });

  afterAll(async () => {
    await Promise.all(opened.map((s) => s.close()));
    if (db !== undefined) await dropOrKeep(db, failed);
  });

  /** Resolves with the first notification for `room` on `topic`, or rejects with what was heard. */
  const hear = (
    store: Store,
    topic: ChangeTopic,
    room: string,
    topics?: readonly ChangeTopic[],
  ): { heard: Promise<void>; off: () => void } => {
    const log: string[] = [];
    let off = (): void => {};
    const heard = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`never heard ${topic}:${room}; heard ${log.join(", ")}`)),
        10_000,
      );
      off = store.onChange((t, r) => {
        log.push(`${t}:${r ?? "*"}`);
        if (t === topic && r === room) {
          clearTimeout(timer);
          resolve();
        }
      }, topics);
    });
    return { heard, off: () => off() };
  };

  it("another connection hears a commit through LISTEN/NOTIFY, naming the topic and room", async () => {
    const a = await open();
    const b = await open();
    const room = "!notify:example.org";
    const fence = await becomeLeader(a, room);
    await publishRunning(a, fence, dag("n1", [task("t")]));
    // Wait until b is listening: its first (re)connect wakes it once with no room.
    const ready = new Promise<void>((resolve) => {
      const off = b.onChange(() => {
        off();
        resolve();
      });
    });
    const wait = hear(b, "tasks", room);
    await ready;
    await a.claimTask(offer(session("w"), [room]));
    await wait.heard;
    wait.off();
  });

  it("a claim's and a finish's notifications reach only processes where someone wants those topics; a later subscriber is caught up", async () => {
    const a = await open();
    const b = await open();
    const room = "!hot:example.org";
    const fence = await becomeLeader(a, room);
    const heard: string[] = [];
    // Like a follower's worker and lease keeper: wake and lease only.
    const offCold = b.onChange((t, r) => heard.push(`${t}:${r ?? "*"}`), ["wake", "lease", "runs"]);
    // Wait until b's LISTEN is in place (its connect wakes it once with no room): a commit before
    // that sends a notification b never sees, and the step below would wait for it in vain.
    await new Promise<void>((resolve) => {
      const off = b.onChange(() => {
        off();
        resolve();
      });
    });
    // Prove b listens (a runs change it wants) before the claim and the finish.
    const ready = hear(b, "runs", room, ["runs"]);
    await publishRunning(a, fence, dag("h1", [task("t"), task("u")]));
    await ready.heard;
    ready.off();
    const t = await a.claimTask(offer(session("w"), [room]));
    await a.finishTask(t!.token, ok);
    // A runs change sent after them arrives after them (one server, commit order): b had its chance.
    const after = hear(b, "runs", room, ["runs"]);
    await a.cancelRun(cmd(fence), room, "h1", "@bob:example.org");
    await after.heard;
    after.off();
    // (The connect's wake-up names every topic for no room; none names this one.)
    expect(heard.filter((h) => h === `tasks:${room}` || h === `done:${room}`)).toEqual([]);
    expect(heard).toContain(`runs:${room}`);
    // Now a leader loop subscribes for the hot topics: caught up at once (room null), then it hears them.
    const caughtUp = new Promise<void>((resolve) => {
      const off = b.onChange(
        (topic, r) => {
          if (topic === "done" && r === null) {
            off();
            resolve();
          }
        },
        ["done", "tasks"],
      );
    });
    await caughtUp;
    const hot = hear(b, "tasks", room);
    const keepHot = b.onChange(() => {}, ["tasks"]);
    await publishRunning(a, fence, dag("h2", [task("t")]));
    await a.claimTask(offer(session("w"), [room]));
    await hot.heard;
    hot.off();
    keepHot();
    offCold();
  });

  it("the change feed reconnects after its connection is killed and hears later commits", async () => {
    const a = await open();
    const lost: unknown[] = [];
    const b = await open({ onListenerError: (e) => lost.push(e) });
    const room = "!reconnect:example.org";
    // A listener that stays subscribed throughout: with none, the feed would close its connection.
    const keep = b.onChange(() => {});
    const first = hear(b, "inbox", room);
    const event = (id: string) => ({
      eventId: id,
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: {},
      seenBy: "a",
    });
    // Keep inserting until b hears one: it proves the LISTEN is up without guessing a delay.
    for (let i = 0; ; i++) {
      await a.insertInboxEvent(event(`$before-${i}`));
      const done = await Promise.race([
        first.heard.then(() => true),
        new Promise((r) => setTimeout(() => r(false), 50)),
      ]);
      if (done) break;
    }
    first.off();
    const killed = await db.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'dagbot-listen'`,
    );
    expect(killed[0]?.n).toBeGreaterThanOrEqual(1);
    const second = hear(b, "inbox", room);
    for (let i = 0; ; i++) {
      await a.insertInboxEvent(event(`$after-${i}`));
      const done = await Promise.race([
        second.heard.then(() => true),
        new Promise((r) => setTimeout(() => r(false), 50)),
      ]);
      if (done) break;
    }
    second.off();
    keep();
    expect(lost.length).toBeGreaterThanOrEqual(1);
  });

  it("NUL characters from chat or a process are stored (as U+FFFD) instead of failing the write", async () => {
    const store = await open();
    const room = "!nul:example.org";
    await store.insertInboxEvent({
      eventId: "$nul",
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: { body: "!dag status\u0000x", "k\u0000": ["\u0000"] },
      seenBy: "n",
    });
    expect((await store.getInboxEvent("$nul"))?.content).toEqual({
      body: "!dag status\uFFFDx",
      "k\uFFFD": ["\uFFFD"],
    });
    const fence = await becomeLeader(store, room);
    const run = await publishRunning(store, fence, dag("nul", [task("t")]));
    const c = await store.claimTask(offer(session("w"), [room]));
    await store.finishTask(c!.token, { ...ok, output: "bin\u0000ary", error: "bad\u0000" });
    expect(await store.getTask(run.runId, "t")).toMatchObject({ output: "bin\uFFFDary", error: "bad\uFFFD" });
  });

  it("lone surrogates (legal JSON escapes a homeserver may relay) are stored as U+FFFD instead of failing the write", async () => {
    const store = await open();
    const room = "!surrogate:example.org";
    // jsonb refuses \ud800 without its pair; a refused insert would be retried by intake forever.
    await store.insertInboxEvent({
      eventId: "$lone",
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: { body: "!dag status \ud800x\udc00", "k\udfff": ["\ud83d\ude42", "\ud83d"] },
      seenBy: "n",
    });
    expect((await store.getInboxEvent("$lone"))?.content).toEqual({
      body: "!dag status \uFFFDx\uFFFD",
      "k\uFFFD": ["\ud83d\ude42", "\uFFFD"],
    });
  });

  it("schemas keep stores apart in one database, and 6 concurrent openers migrate a new schema once", async () => {
    const stores = await Promise.all(Array.from({ length: 6 }, () => open({ schema: "tenant_a" })));
    const other = await open({ schema: "tenant_b" });
    const versions = await db.query<{ version: number }>("SELECT version FROM tenant_a.schema_version");
    // Each version once, however many openers raced.
    expect(versions.map((v) => v.version)).toEqual(
      Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1),
    );
    await stores[0]!.setRoomCap("!r", 3);
    expect(await stores[5]!.getRoomCap("!r")).toBe(3);
    expect(await other.getRoomCap("!r")).toBe(16);
  });

  it("an unreachable server is a StoreError at open, naming no credentials", async () => {
    const e = await openPostgresStore("postgres://dagbot:s3cret@127.0.0.1:1/none").catch(
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(StoreError);
    expect(String((e as Error).message)).not.toContain("s3cret");
  });

  it("16 pooled connections drain a queue: every task claimed and finished exactly once, each logged once", async () => {
    const leaderStore = await open();
    const room = "!drain:example.org";
    const fence = await becomeLeader(leaderStore, room);
    await leaderStore.setRoomCap(room, 200, { fence: fence });
    const run = await publishRunning(
      leaderStore,
      fence,
      dag(
        "wide",
        Array.from({ length: 96 }, (_, i) => task(`t${i}`)),
      ),
    );
    const worker = await open({ poolSize: 16 });
    const finished: string[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        const me = session(`w${i}`);
        for (
          let c = await worker.claimTask(offer(me, [room]));
          c !== null;
          c = await worker.claimTask(offer(me, [room]))
        ) {
          await worker.finishTask(c.token, ok);
          finished.push(c.task.taskId);
        }
      }),
    );
    expect(finished).toHaveLength(96);
    expect(new Set(finished).size).toBe(96);
    const tasks = await leaderStore.listTasks(run.runId);
    expect(tasks.every((t) => t.status === "succeeded")).toBe(true);
    // At least two workers really ran at once (the pool is not one connection in disguise).
    const claimers = new Set(tasks.map((t) => t.executor?.nodeId));
    expect(claimers.size).toBeGreaterThan(1);
    const events = await leaderStore.readEvents(room, 0, 10_000);
    const seqs = events.map((e) => e.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(events.filter((e) => e.kind === "task.running")).toHaveLength(96);
    expect(events.filter((e) => e.kind === "task.succeeded")).toHaveLength(96);
  });

  it("a raw connection sees the server's clock used when no test clock is given", async () => {
    const store = await open();
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const before = Number(
        (await client.query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000) AS t")).rows[0].t,
      );
      const now = await store.now();
      const { expiresAt } = await store.acquireLease("!clock:example.org", session("n"), 10_000);
      const after = Number(
        (await client.query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000) AS t")).rows[0].t,
      );
      expect(now).toBeGreaterThanOrEqual(before);
      expect(now).toBeLessThanOrEqual(after);
      expect(expiresAt - 10_000).toBeGreaterThanOrEqual(before);
      expect(expiresAt - 10_000).toBeLessThanOrEqual(after);
    } finally {
      await client.end();
    }
  });
});
