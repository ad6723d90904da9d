/**
 * PostgreSQL wake-ups (docs/architecture.md §8, "Wake-ups"), on a real server: no write
 * transaction notifies; a Store sends one NOTIFY transaction for the commits of a batching window,
 * so a burst of claims and finishes takes PostgreSQL's notify lock far fewer times than it commits,
 * and another Store still hears every one of them. Counts only, never times.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  DEFAULT_ROOM_CAP,
  openPostgresStore,
  postgresStoreStats,
} from "../../src/adapters/postgres/index.js";
import type { Store } from "../../src/ports/store.js";
import { CLAIM_LEFT_MORE } from "../../src/ports/store.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../support/store-fixtures.js";

describe("PostgreSQL wake-ups, batched", () => {
  let db: TestDatabase;
  let failed = false;
  const opened: Store[] = [];

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

  const notifies = (s: Store): number => {
    const stats = postgresStoreStats(s);
    if (stats === undefined) throw new Error("not a PostgreSQL store");
    return stats.notifyTransactions;
  };

  it("a burst of N claims and finishes sends far fewer than N NOTIFY transactions, and another Store hears each", async () => {
    // A window long enough that the burst's commits share a few of them, whatever the machine's load.
    const a = await openPostgresStore(db.url, { poolSize: 4, notifyWindowMs: 200 });
    const b = await openPostgresStore(db.url, { poolSize: 2 });
    opened.push(a, b);
    const room = "!burst:example.org";
    // The default room cap: the one scheduling step queues them all.
    const n = DEFAULT_ROOM_CAP;
    const fence = await becomeLeader(a, room);

    const heard = new Set<string>();
    let listening!: () => void;
    const ready = new Promise<void>((resolve) => (listening = resolve));
    const off = b.onChange((topic, r, nodes) => {
      if (r === null) listening(); // the LISTEN connection's first wake-up: it is in place
      // A claimer is named with CLAIM_LEFT_MORE before it when it left tasks behind.
      if (r === room)
        for (const node of nodes ?? [""]) heard.add(`${topic}:${node.replace(CLAIM_LEFT_MORE, "")}`);
    });
    await ready;
    await publishRunning(
      a,
      fence,
      dag(
        "burst",
        Array.from({ length: n }, (_, i) => task(`t${i}`)),
      ),
    );
    // The run's NOTIFY has gone (b heard it): what a sends from here on is the burst's.
    for (let i = 0; i < 600 && !heard.has("runs:"); i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(heard.has("runs:")).toBe(true);
    const before = notifies(a);

    // Claims that race skip each other's locked rows and may come back empty: each claimer tries
    // again until it holds a task. Every attempt is a write statement of its own.
    let writes = 0;
    const claimed = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        for (let attempt = 0; attempt < 100; attempt++) {
          writes += 1;
          const c = await a.claimTask(offer(session(`w${i}`), [room]));
          if (c !== null) return c;
        }
        throw new Error(`w${i} claimed nothing in 100 tries`);
      }),
    );
    expect(new Set(claimed.map((c) => c.task.taskId)).size).toBe(n);
    await Promise.all(claimed.map((c) => a.finishTask(c.token, ok)));
    writes += n;

    // Every claimer named in a notification b heard, and the finishes' done.
    const want = [...Array.from({ length: n }, (_, i) => `tasks:w${i}`), "done:"];
    for (let i = 0; i < 300 && !want.every((x) => heard.has(x)); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    off();
    expect(want.filter((x) => !heard.has(x))).toEqual([]);

    const sent = notifies(a) - before;
    expect(sent).toBeGreaterThanOrEqual(1);
    expect(sent).toBeLessThanOrEqual(writes / 4);
  });

  it("a write transaction commits without notifying: its change reaches another Store by the batch, after the commit", async () => {
    const a = await openPostgresStore(db.url, { poolSize: 2 });
    const b = await openPostgresStore(db.url, { poolSize: 2 });
    opened.push(a, b);
    const room = "!tx:example.org";
    let listening!: () => void;
    const ready = new Promise<void>((resolve) => (listening = resolve));
    const runs: string[] = [];
    const off = b.onChange((topic, r) => {
      if (r === null) listening();
      if (topic === "runs" && r === room) runs.push(r);
    });
    await ready;
    const fence = await becomeLeader(a, room);
    const before = notifies(a);
    await publishRunning(a, fence, dag("one", [task("t")]));
    for (let i = 0; i < 600 && runs.length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    off();
    expect(runs.length).toBeGreaterThan(0);
    // The lease's acquire and the run's writes: at least one NOTIFY transaction, each after its commits.
    expect(notifies(a)).toBeGreaterThan(before);
    expect(postgresStoreStats({} as Store)).toBeUndefined();
  });
});
