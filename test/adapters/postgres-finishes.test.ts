/**
 * PostgreSQL's batched finishes (src/adapters/postgres/finishes.ts, docs/architecture.md §8): the
 * finishes asked for while others are on their way go together in one statement, each fenced and
 * answered on its own; a statement the server rejects as a whole is sent again finish by finish,
 * so the one finish it cannot take fails alone. The contract suite (finish-claim.ts) holds both
 * stores to the answers; this file holds PostgreSQL to the batching itself, by its counts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Db } from "../../src/adapters/postgres/db.js";
import { taskRetryWaitMs } from "../../src/domain/backoff.js";
import { Finishes } from "../../src/adapters/postgres/finishes.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { TaskSpec } from "../../src/domain/model.js";
import type { ClaimedTask, Store } from "../../src/ports/store.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import {
  becomeLeader,
  dag,
  failed as failure,
  offer,
  ok,
  publishRunning,
  session,
  task,
} from "../support/store-fixtures.js";

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
  const running = async (
    n: number,
    spec: (i: number) => Partial<Omit<TaskSpec, "id">> = () => ({}),
  ): Promise<{ room: string; runId: string; held: ClaimedTask[] }> => {
    const room = `!fin-${Math.random().toString(36).slice(2, 10)}`;
    const fence = await becomeLeader(store, room);
    await store.setRoomCap(room, n, { fence });
    const ids = Array.from({ length: n }, (_, i) => `t${i}`);
    const run = await publishRunning(
      store,
      fence,
      dag(
        `d${n}`,
        ids.map((id, i) => task(id, spec(i))),
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

  it("failures alone and in a batch wait the domain's retry wait of their own claim, each its own", async () => {
    // Each task its own base, so a wait read at another finish's position would show.
    const { runId, held } = await running(5, (i) => ({ retries: 1, retryBackoffMs: 1000 * (i + 1) }));
    const finishes = new Finishes(db);
    const answers = await Promise.all(held.map((c) => finishes.finish(c.token, failure)));
    expect(answers.map((a) => a.status)).toEqual(held.map(() => "queued"));
    // Two alone, then the other three in one statement.
    expect(finishes.counts).toEqual({ statements: 3, finishes: 5 });
    for (const c of held) {
      const t = await store.getTask(runId, c.task.taskId);
      expect(t).toMatchObject({ status: "queued", attempt: 2 });
      expect(t!.notBefore! - t!.queuedAt!).toBe(taskRetryWaitMs(c.task.retryBackoffMs, 1));
    }
  });

  it("a finish picks the answer for the row as it is: attempts raised since the claim retry, a token without its claim is read first", async () => {
    const { runId, held } = await running(3, () => ({ retries: 0, retryBackoffMs: 7000 }));
    const [spent, raised, bare] = held as [ClaimedTask, ClaimedTask, ClaimedTask];
    // The claim found no attempt left; the row has one more now (as a leader may give it).
    for (const c of [raised, bare])
      await db.pool.query(
        "UPDATE tasks SET max_attempts = max_attempts + 1 WHERE run_id = $1 AND task_id = $2",
        [runId, c.task.taskId],
      );
    const finishes = new Finishes(db);
    expect((await finishes.finish(spent.token, failure)).status).toBe("failed");
    expect((await finishes.finish(raised.token, failure)).status).toBe("queued");
    const { claim, ...token } = bare.token;
    expect(claim).toEqual({ attempt: 1, retryBackoffMs: 7000 });
    expect((await finishes.finish(token, failure)).status).toBe("queued");
    for (const c of [raised, bare]) {
      const t = await store.getTask(runId, c.task.taskId);
      expect(t!.notBefore! - t!.queuedAt!).toBe(taskRetryWaitMs(7000, 1));
    }
  });
});
