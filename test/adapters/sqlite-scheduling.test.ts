/**
 * The SQLite scheduler step agrees with the pure reference (src/domain/scheduling.ts decideSchedule)
 * on random room states read back through the public API: random DAGs, run and task statuses
 * arranged through the database, random caps, keys and priorities. Property-tested with fast-check.
 */
import fc from "fast-check";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TASK_STATUSES } from "../../src/domain/model.js";
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import { decideSchedule } from "../../src/domain/scheduling.js";
import type { Store } from "../../src/ports/store.js";
import { becomeLeader, cmd, dag, runInput, task } from "../support/store-fixtures.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

const db = sqliteTestDb("sqlite-scheduling");
let store: Store;
let failed = false;
let room = 0;

beforeAll(async () => {
  store = await db.open();
});
beforeEach(({ onTestFailed }) =>
  onTestFailed(() => {
    failed = true;
  }),
);
afterAll(async () => {
  await store?.close();
  db.cleanup(failed);
});

const taskArb = (i: number) =>
  fc.record({
    needs: fc.subarray(
      Array.from({ length: i }, (_, k) => `t${k}`),
      { maxLength: Math.min(i, 2) },
    ),
    priority: fc.integer({ min: 0, max: 2 }),
    key: fc.constantFrom(null, "k1", "k2"),
    status: fc.constantFrom<TaskStatus>(...TASK_STATUSES, "blocked", "blocked", "blocked"),
  });
const runArb = fc.integer({ min: 1, max: 5 }).chain((n) =>
  fc.record({
    status: fc.constantFrom<RunStatus>("running", "running", "running", "pending", "canceling", "succeeded"),
    maxParallel: fc.constantFrom(null, 1, 2),
    tasks: fc.tuple(...Array.from({ length: n }, (_, i) => taskArb(i))),
  }),
);

describe("SQLite scheduleStep", () => {
  it("queues and skips exactly what decideSchedule decides for the same snapshot", async () => {
    const seen = { queued: 0, skipped: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.array(runArb, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 5 }),
        async (runs, cap) => {
          const roomId = `!sched-${++room}`;
          const fence = await becomeLeader(store, roomId);
          await store.setRoomCap(roomId, cap, { fence: fence });
          const raw = db.raw();
          for (const [r, spec] of runs.entries()) {
            const d = dag(
              `d${r}`,
              spec.tasks.map((t, i) =>
                task(`t${i}`, { needs: t.needs, priority: t.priority, concurrencyKey: t.key }),
              ),
              { maxParallel: spec.maxParallel },
            );
            const created = await store.createRun(cmd(fence), runInput(roomId, d));
            if (created.kind !== "created") throw new Error(created.kind);
            // Arrange the state through the database: any status mix history could leave. Only
            // reachable ones: a pending run's tasks are all blocked, a succeeded run's all succeeded
            // (an active task under a finished run cannot exist, and the adapters read only open runs).
            raw.prepare("UPDATE runs SET status = ? WHERE run_id = ?").run(spec.status, created.run.runId);
            for (const [i, t] of spec.tasks.entries()) {
              const status =
                spec.status === "succeeded" ? "succeeded" : spec.status === "pending" ? "blocked" : t.status;
              raw
                .prepare("UPDATE tasks SET status = ? WHERE run_id = ? AND task_id = ?")
                .run(status, created.run.runId, `t${i}`);
            }
          }
          const before = await snapshot(roomId);
          const expected = decideSchedule(before, { globalCap: cap });
          const result = await store.scheduleStep(fence);
          expect(result).toEqual({ queued: expected.toQueue.length, skipped: expected.toSkip.length });
          seen.queued += result.queued;
          seen.skipped += result.skipped;
          const after = await snapshot(roomId);
          const key = (t: { runId: string; taskId: string }) => `${t.runId}/${t.taskId}`;
          const queued = new Set(expected.toQueue.map(key));
          const skipped = new Set(expected.toSkip.map(key));
          for (const t of before.tasks) {
            const want = queued.has(key(t)) ? "queued" : skipped.has(key(t)) ? "skipped" : t.status;
            expect(after.tasks.find((a) => key(a) === key(t))?.status, key(t)).toBe(want);
          }
        },
      ),
      { numRuns: 40 },
    );
    // The generated states did exercise both moves, not only the empty decision.
    expect(seen.queued).toBeGreaterThan(0);
    expect(seen.skipped).toBeGreaterThan(0);
  });
});

async function snapshot(roomId: string) {
  const runs = await store.listRuns(roomId, { limit: 1000 });
  const tasks = (await Promise.all(runs.map((r) => store.listTasks(r.runId)))).flat();
  return {
    runs: runs.map((r) => ({ runId: r.runId, status: r.status, maxParallel: r.maxParallel })),
    tasks: tasks.map((t) => ({
      runId: t.runId,
      taskId: t.taskId,
      status: t.status,
      needs: t.needs,
      priority: t.priority,
      seq: t.seq,
      concurrencyKey: t.concurrencyKey,
    })),
  };
}
