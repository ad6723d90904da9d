/**
 * PostgreSQL's batched finishes (src/adapters/postgres/finishes.ts, docs/architecture.md §8): the
 * finishes asked for while others are on their way go together in one statement, each fenced and
 * answered on its own; a statement the server rejects as a whole is sent again finish by finish,
 * so the one finish it cannot take fails alone. The contract suite (finish-claim.ts) holds both
 * stores to the answers; this file holds PostgreSQL to the batching itself, by its counts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Db } from "../../src/adapters/postgres/db.js";
import { Finishes } from "../../src/adapters/postgres/finishes.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { ClaimedTask, Store } from "../../src/ports/store.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../support/store-fixtures.js";

describe("PostgreSQL batched finishes", () => {
  let tdb: TestDatabase;
  let store: Store;
  let db: Db;
  let failed = false;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    store = await openPostgresStore(tdb.url, { poolSize: 4 });
    db = new Db({ url: tdb.url, poolSize: 4, schema: "public", clock: undefined });
  });

  afterEach((t) => {
    if (t.task.result?.state === "fail") failed = true;
  });

  afterAll(async () => {
    await db?.pool.end();
    await store?.close();
    if (tdb !== undefined) await dropOrKeep(tdb, failed);
  });

  /** `n` running tasks of a fresh room, claimed by one node. */
  const running = async (n: number): Promise<{ room: string; runId: string; held: ClaimedTask[] }> => {
    const room = `!fin-${Math.random().toString(36).slice(2, 10)}`;
    const fence = await becomeLeader(store, room);
    await store.setRoomCap(room, n, { fence });
    const ids = Array.from({ length: n }, (_, i) => `t${i}`);
    const run = await publishRunning(
      store,
      fence,
      dag(
        `d${n}`,
        ids.map((id) => task(id)),
      ),
    );
    const held = (await store.claimTasks(offer(session("w"), [room]), n)).claimed;
    expect(held).toHaveLength(n);
    return { room, runId: run.runId, held };
  };

  it("finishes asked for while two statements are on their way go together in the next one", async () => {
    const { room, runId, held } = await running(6);
    const finishes = new Finishes(db);
    const answers = await Promise.all(held.map((c) => finishes.finish(c.token, ok)));
    expect(answers.every((a) => a.status === "succeeded")).toBe(true);
    // The first two go at once, alone; the four asked for meanwhile share the third statement.
    expect(finishes.counts).toEqual({ statements: 3, finishes: 6 });
    const log = (await store.readEvents(room, 0)).filter((e) => e.kind === "task.succeeded");
    expect(log.map((e) => e.taskId).sort()).toEqual(held.map((c) => c.task.taskId).sort());
    for (const c of held) expect((await store.getTask(runId, c.task.taskId))?.status).toBe("succeeded");
  });

  it("a finish the server refuses inside a batch fails alone; the others of its batch are recorded", async () => {
    const { runId, held } = await running(4);
    const finishes = new Finishes(db);
    const [a, b, bad, d] = held as [ClaimedTask, ClaimedTask, ClaimedTask, ClaimedTask];
    // An exit code beyond PostgreSQL's integer: the statement carrying it fails as a whole.
    const settled = await Promise.allSettled([
      finishes.finish(a.token, ok),
      finishes.finish(b.token, ok),
      finishes.finish(bad.token, { ...ok, exitCode: 2 ** 40 }),
      finishes.finish(d.token, ok),
    ]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(String((settled[2] as PromiseRejectedResult).reason)).toMatch(/range|integer/i);
    // Two alone, then the batch of two that failed (each of its finishes then went again alone).
    expect(finishes.counts).toEqual({ statements: 3, finishes: 4 });
    for (const c of [a, b, d]) expect((await store.getTask(runId, c.task.taskId))?.status).toBe("succeeded");
    expect(await store.getTask(runId, bad.task.taskId)).toMatchObject({
      status: "running",
      version: bad.token.version,
    });
  });
});
