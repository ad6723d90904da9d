// The scheduler's pure decisions: examples of each rule, then properties over random rooms.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import { RUN_STATUSES, TASK_STATUSES } from "../../src/domain/model.js";
import { deriveRunOutcome } from "../../src/domain/run-status.js";
import type {
  ScheduleDecision,
  ScheduleRun,
  ScheduleSnapshot,
  ScheduleTask,
} from "../../src/domain/scheduling.js";
import { comparePickOrder, decideSchedule } from "../../src/domain/scheduling.js";
import { isTerminalTask } from "../../src/domain/task-states.js";

const ACTIVE = new Set<TaskStatus>(["queued", "running", "canceling"]);
const ENDS_BADLY = new Set<TaskStatus>(["failed", "timed_out", "canceled", "skipped"]);

let seqCounter = 0;
function task(runId: string, taskId: string, over: Partial<ScheduleTask> = {}): ScheduleTask {
  seqCounter += 1;
  return {
    runId,
    taskId,
    status: "blocked",
    needs: [],
    priority: 0,
    seq: seqCounter,
    concurrencyKey: null,
    ...over,
  };
}
const run = (runId: string, over: Partial<ScheduleRun> = {}): ScheduleRun => ({
  runId,
  status: "running",
  maxParallel: null,
  ...over,
});
const ids = (refs: ReadonlyArray<{ runId: string; taskId: string }>): string[] =>
  refs.map((r) => `${r.runId}/${r.taskId}`);

describe("decideSchedule examples", () => {
  it("queues tasks whose needs all succeeded and leaves the rest blocked", () => {
    const snap: ScheduleSnapshot = {
      runs: [run("r")],
      tasks: [
        task("r", "a", { status: "succeeded" }),
        task("r", "b", { needs: ["a"] }),
        task("r", "c", { needs: ["a", "b"] }),
        task("r", "d", { status: "running" }),
        task("r", "e", { needs: ["d"] }),
      ],
    };
    expect(decideSchedule(snap, { globalCap: null })).toEqual({
      toQueue: [{ runId: "r", taskId: "b" }],
      toSkip: [],
      toOpen: [],
      toExpand: [],
      toStop: [],
    });
  });

  it("skips everything behind a failure in one decision, transitively", () => {
    const snap: ScheduleSnapshot = {
      runs: [run("r")],
      tasks: [
        task("r", "a", { status: "failed" }),
        task("r", "b", { needs: ["a"] }),
        task("r", "c", { needs: ["b"] }),
        task("r", "d", { needs: ["c", "x"] }),
        task("r", "x", { status: "succeeded" }),
        task("r", "y", { needs: ["x"] }),
      ],
    };
    const d = decideSchedule(snap, { globalCap: null });
    expect(ids(d.toSkip)).toEqual(["r/b", "r/c", "r/d"]);
    expect(ids(d.toQueue)).toEqual(["r/y"]);
  });

  it.each(["timed_out", "canceled", "skipped"] as const)("skips behind a need that ended %s", (status) => {
    const snap = { runs: [run("r")], tasks: [task("r", "a", { status }), task("r", "b", { needs: ["a"] })] };
    expect(ids(decideSchedule(snap, { globalCap: null }).toSkip)).toEqual(["r/b"]);
  });

  it("opens a ready approval gate instead of queueing it, outside every cap, and once", () => {
    const snap: ScheduleSnapshot = {
      runs: [run("r")],
      tasks: [
        task("r", "a", { status: "succeeded" }),
        task("r", "g", { needs: ["a"], isGate: true }),
        task("r", "h", { needs: ["a"], isGate: true, gateOpen: true }),
        task("r", "w", { needs: ["g"] }),
        task("r", "b", { needs: ["a"] }),
      ],
    };
    const d = decideSchedule(snap, { globalCap: 0 });
    expect(ids(d.toOpen)).toEqual(["r/g"]);
    expect(d.toQueue).toEqual([]);
    expect(ids(decideSchedule(snap, { globalCap: null }).toQueue)).toEqual(["r/b"]);
  });

  it("moves nothing in runs that are not running", () => {
    const statuses = RUN_STATUSES.filter((s) => s !== "running");
    for (const status of statuses) {
      const snap = {
        runs: [run("r", { status })],
        tasks: [task("r", "a", { status: "failed" }), task("r", "b", { needs: ["a"] }), task("r", "c")],
      };
      expect(decideSchedule(snap, { globalCap: null }), status).toEqual({
        toQueue: [],
        toSkip: [],
        toOpen: [],
        toExpand: [],
        toStop: [],
      });
    }
    expect(decideSchedule({ runs: [], tasks: [task("ghost", "a")] }, { globalCap: null }).toQueue).toEqual(
      [],
    );
  });

  it("keeps a task with a need missing from the snapshot blocked", () => {
    const snap = { runs: [run("r")], tasks: [task("r", "b", { needs: ["nope"] })] };
    expect(decideSchedule(snap, { globalCap: null })).toEqual({
      toQueue: [],
      toSkip: [],
      toOpen: [],
      toExpand: [],
      toStop: [],
    });
  });

  it("admits by priority first, then first in first out, up to the global cap", () => {
    const snap = {
      runs: [run("r1"), run("r2")],
      tasks: [
        task("r1", "old-low", { priority: 0 }),
        task("r1", "old-high", { priority: 5 }),
        task("r2", "new-high", { priority: 5 }),
        task("r2", "new-low", { priority: 0 }),
        task("r2", "busy", { status: "running" }),
      ],
    };
    expect(ids(decideSchedule(snap, { globalCap: 4 }).toQueue)).toEqual([
      "r1/old-high",
      "r2/new-high",
      "r1/old-low",
    ]);
    expect(ids(decideSchedule(snap, { globalCap: null }).toQueue)).toEqual([
      "r1/old-high",
      "r2/new-high",
      "r1/old-low",
      "r2/new-low",
    ]);
  });

  it("pauses at cap 0 and never admits while a lowered cap is exceeded", () => {
    const tasks = [
      task("r", "a", { status: "running" }),
      task("r", "b", { status: "queued" }),
      task("r", "c"),
    ];
    expect(decideSchedule({ runs: [run("r")], tasks }, { globalCap: 0 }).toQueue).toEqual([]);
    expect(decideSchedule({ runs: [run("r")], tasks }, { globalCap: 1 }).toQueue).toEqual([]);
    expect(decideSchedule({ runs: [run("r")], tasks }, { globalCap: 2 }).toQueue).toEqual([]);
    expect(ids(decideSchedule({ runs: [run("r")], tasks }, { globalCap: 3 }).toQueue)).toEqual(["r/c"]);
  });

  it("counts canceling tasks against the caps: their process still runs", () => {
    const snap = {
      runs: [run("r", { maxParallel: 1 })],
      tasks: [task("r", "a", { status: "canceling" }), task("r", "b")],
    };
    expect(decideSchedule(snap, { globalCap: null }).toQueue).toEqual([]);
  });

  it("holds a run at its max_parallel without holding back other runs", () => {
    const snap = {
      runs: [run("r1", { maxParallel: 2 }), run("r2")],
      tasks: [
        task("r1", "a", { priority: 9 }),
        task("r1", "b", { priority: 9 }),
        task("r1", "c", { priority: 9 }),
        task("r2", "z", { priority: 0 }),
      ],
    };
    expect(ids(decideSchedule(snap, { globalCap: null }).toQueue)).toEqual(["r1/a", "r1/b", "r2/z"]);
  });

  it("admits one task per concurrency key across runs, FIFO behind it", () => {
    const snap = {
      runs: [run("r1"), run("r2")],
      tasks: [
        task("r1", "first", { concurrencyKey: "s3" }),
        task("r2", "second", { concurrencyKey: "s3" }),
        task("r2", "free", { concurrencyKey: null }),
        task("r2", "other-key", { concurrencyKey: "db" }),
      ],
    };
    expect(ids(decideSchedule(snap, { globalCap: null }).toQueue)).toEqual([
      "r1/first",
      "r2/free",
      "r2/other-key",
    ]);
    const held = {
      ...snap,
      tasks: [...snap.tasks.slice(1), task("r9", "holder", { status: "running", concurrencyKey: "s3" })],
    };
    expect(ids(decideSchedule(held, { globalCap: null }).toQueue)).toEqual(["r2/free", "r2/other-key"]);
  });
});

// ---- properties over random rooms ----

interface Room {
  snapshot: ScheduleSnapshot;
  globalCap: number | null;
}

const taskStatusArb = fc.constantFrom<TaskStatus>(
  ...TASK_STATUSES,
  "blocked",
  "blocked",
  "succeeded",
  "succeeded",
);

/** One run: tasks t0..tn-1, each needing only earlier ones, so the graph is acyclic like parseDag's. */
const runArb = (runId: string, statuses: fc.Arbitrary<TaskStatus>) =>
  fc
    .record({
      status: fc.constantFrom<RunStatus>("running", "running", "running", "pending", "canceling"),
      maxParallel: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
      tasks: fc.array(
        fc.record({
          status: statuses,
          needMask: fc.integer({ min: 0, max: 255 }),
          priority: fc.integer({ min: 0, max: 2 }),
          concurrencyKey: fc.option(fc.constantFrom("k1", "k2", "k3"), { nil: null, freq: 2 }),
        }),
        { minLength: 1, maxLength: 8 },
      ),
    })
    .map(({ status, maxParallel, tasks }) => ({
      run: { runId, status, maxParallel } satisfies ScheduleRun,
      tasks: tasks.map((t, i) => ({
        runId,
        taskId: `t${i}`,
        status: t.status,
        needs: Array.from({ length: i }, (_, j) => j)
          .filter((j) => (t.needMask >> j) & 1)
          .map((j) => `t${j}`),
        priority: t.priority,
        seq: 0,
        concurrencyKey: t.concurrencyKey,
      })),
    }));

const roomArb = (statuses: fc.Arbitrary<TaskStatus>, minCap = 0): fc.Arbitrary<Room> =>
  fc
    .record({
      runs: fc.tuple(runArb("ra", statuses), runArb("rb", statuses), runArb("rc", statuses)),
      count: fc.integer({ min: 1, max: 3 }),
      order: fc.array(fc.integer(), { minLength: 24, maxLength: 24 }),
      globalCap: fc.option(fc.integer({ min: minCap, max: 8 }), { nil: null }),
    })
    .map(({ runs, count, order, globalCap }) => {
      const chosen = runs.slice(0, count);
      const tasks = chosen.flatMap((r) => r.tasks);
      // A random but unique creation order across the room.
      const ranks = tasks.map((_, i) => i).sort((a, b) => (order[a] ?? 0) - (order[b] ?? 0) || a - b);
      ranks.forEach((taskIndex, rank) => {
        tasks[taskIndex]!.seq = rank;
      });
      return { snapshot: { runs: chosen.map((r) => r.run), tasks }, globalCap };
    });

const tkey = (t: { runId: string; taskId: string }): string => `${t.runId}/${t.taskId}`;

function apply(snapshot: ScheduleSnapshot, d: ScheduleDecision): ScheduleSnapshot {
  const q = new Set(d.toQueue.map(tkey));
  const s = new Set(d.toSkip.map(tkey));
  return {
    runs: snapshot.runs,
    tasks: snapshot.tasks.map((t) =>
      q.has(tkey(t)) ? { ...t, status: "queued" } : s.has(tkey(t)) ? { ...t, status: "skipped" } : t,
    ),
  };
}

function counts(snapshot: ScheduleSnapshot) {
  let global = 0;
  const perRun = new Map<string, number>();
  const perKey = new Map<string, number>();
  for (const t of snapshot.tasks) {
    if (!ACTIVE.has(t.status)) continue;
    global += 1;
    perRun.set(t.runId, (perRun.get(t.runId) ?? 0) + 1);
    if (t.concurrencyKey !== null) perKey.set(t.concurrencyKey, (perKey.get(t.concurrencyKey) ?? 0) + 1);
  }
  return { global, perRun, perKey };
}

function isReady(snapshot: ScheduleSnapshot, t: ScheduleTask): boolean {
  const runOf = snapshot.runs.find((r) => r.runId === t.runId);
  const statusOf = (id: string) => snapshot.tasks.find((x) => x.runId === t.runId && x.taskId === id)?.status;
  return (
    t.status === "blocked" && runOf?.status === "running" && t.needs.every((n) => statusOf(n) === "succeeded")
  );
}

describe("decideSchedule properties", () => {
  it("never exceeds the global cap, a run's max_parallel, or one active task per key", () => {
    fc.assert(
      fc.property(roomArb(taskStatusArb), ({ snapshot, globalCap }) => {
        const before = counts(snapshot);
        const d = decideSchedule(snapshot, { globalCap });
        const after = counts(apply(snapshot, d));
        if (globalCap !== null) {
          expect(after.global).toBeLessThanOrEqual(Math.max(globalCap, before.global));
          if (before.global >= globalCap) expect(d.toQueue).toEqual([]);
        }
        for (const r of snapshot.runs) {
          if (r.maxParallel === null) continue;
          const b = before.perRun.get(r.runId) ?? 0;
          expect(after.perRun.get(r.runId) ?? 0).toBeLessThanOrEqual(Math.max(r.maxParallel, b));
        }
        for (const [k, n] of after.perKey)
          expect(n).toBeLessThanOrEqual(Math.max(1, before.perKey.get(k) ?? 0));
        for (const ref of d.toQueue) {
          const t = snapshot.tasks.find((x) => tkey(x) === tkey(ref))!;
          if (t.concurrencyKey !== null) expect(before.perKey.get(t.concurrencyKey) ?? 0).toBe(0);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("queues only blocked tasks of running runs whose needs all succeeded, and never queues and skips one task", () => {
    fc.assert(
      fc.property(roomArb(taskStatusArb), ({ snapshot, globalCap }) => {
        const d = decideSchedule(snapshot, { globalCap });
        const queued = new Set(d.toQueue.map(tkey));
        expect(queued.size).toBe(d.toQueue.length);
        for (const ref of d.toQueue) {
          const t = snapshot.tasks.find((x) => tkey(x) === tkey(ref))!;
          expect(isReady(snapshot, t)).toBe(true);
        }
        for (const ref of d.toSkip) expect(queued.has(tkey(ref))).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it("skips exactly the blocked tasks of running runs behind a bad end, closed over the graph", () => {
    fc.assert(
      fc.property(roomArb(taskStatusArb), ({ snapshot, globalCap }) => {
        const d = decideSchedule(snapshot, { globalCap });
        const next = apply(snapshot, d);
        const statusOf = (runId: string, id: string) =>
          next.tasks.find((x) => x.runId === runId && x.taskId === id)?.status;
        const skipped = new Set(d.toSkip.map(tkey));
        for (const t of snapshot.tasks) {
          const runOf = snapshot.runs.find((r) => r.runId === t.runId)!;
          const behindBadEnd = t.needs.some((n) => ENDS_BADLY.has(statusOf(t.runId, n)!));
          const shouldSkip = t.status === "blocked" && runOf.status === "running" && behindBadEnd;
          expect(skipped.has(tkey(t)), tkey(t)).toBe(shouldSkip);
        }
        // The fixed point: deciding again on the result finds nothing more to skip.
        expect(decideSchedule(next, { globalCap }).toSkip).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it("admits in priority-then-FIFO order and leaves no ready task out while there is room for it", () => {
    fc.assert(
      fc.property(roomArb(taskStatusArb), ({ snapshot, globalCap }) => {
        const d = decideSchedule(snapshot, { globalCap });
        const queued = new Set(d.toQueue.map(tkey));
        const byRef = (ref: { runId: string; taskId: string }) =>
          snapshot.tasks.find((x) => tkey(x) === tkey(ref))!;
        const picked = d.toQueue.map(byRef);
        expect([...picked].sort(comparePickOrder)).toEqual(picked);
        const after = counts(apply(snapshot, d));
        const maxOf = (runId: string) => snapshot.runs.find((r) => r.runId === runId)?.maxParallel ?? null;
        for (const x of snapshot.tasks) {
          if (!isReady(snapshot, x) || queued.has(tkey(x)) || d.toSkip.some((s) => tkey(s) === tkey(x)))
            continue;
          const max = maxOf(x.runId);
          const runFull = max !== null && (after.perRun.get(x.runId) ?? 0) >= max;
          const keyHeld = x.concurrencyKey !== null && (after.perKey.get(x.concurrencyKey) ?? 0) > 0;
          const globalFull = globalCap !== null && after.global >= globalCap;
          expect(runFull || keyHeld || globalFull, `${tkey(x)} left out with room`).toBe(true);
          // Nothing later in pick order overtook x unless it was held back by something y does not share.
          for (const y of picked) {
            if (comparePickOrder(x, y) >= 0) continue;
            const heldByRun = runFull && y.runId !== x.runId;
            const heldByKey = keyHeld && y.concurrencyKey !== x.concurrencyKey;
            expect(heldByRun || heldByKey, `${tkey(y)} overtook ${tkey(x)}`).toBe(true);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("drives every run to a terminal outcome with any mix of results, within the caps at every step", () => {
    const fresh = roomArb(fc.constant<TaskStatus>("blocked"), 1).map((room) => ({
      ...room,
      snapshot: {
        ...room.snapshot,
        runs: room.snapshot.runs.map((r) => ({
          ...r,
          status: "running" as RunStatus,
          maxParallel: r.maxParallel === 0 ? 1 : r.maxParallel,
        })),
      },
    }));
    fc.assert(
      fc.property(fresh, fc.infiniteStream(fc.boolean()), ({ snapshot, globalCap }, coins) => {
        let state: ScheduleSnapshot = snapshot;
        const coin = coins[Symbol.iterator]();
        for (let step = 0; step < 200; step += 1) {
          const d = decideSchedule(state, { globalCap });
          state = apply(state, d);
          const c = counts(state);
          if (globalCap !== null) expect(c.global).toBeLessThanOrEqual(globalCap);
          for (const [, n] of c.perKey) expect(n).toBe(1);
          for (const r of state.runs)
            if (r.maxParallel !== null) expect(c.perRun.get(r.runId) ?? 0).toBeLessThanOrEqual(r.maxParallel);
          const active = state.tasks.filter((t) => ACTIVE.has(t.status));
          if (active.length === 0 && d.toQueue.length === 0 && d.toSkip.length === 0) break;
          // Finish one active task, succeeding or failing by the coin.
          const done = active[0];
          if (done === undefined) continue;
          const outcome: TaskStatus = coin.next().value ? "succeeded" : "failed";
          state = { ...state, tasks: state.tasks.map((t) => (t === done ? { ...t, status: outcome } : t)) };
        }
        for (const t of state.tasks) {
          expect(isTerminalTask(t.status), `${tkey(t)} ended ${t.status}`).toBe(true);
          const needs = t.needs.map(
            (n) => state.tasks.find((x) => x.runId === t.runId && x.taskId === n)!.status,
          );
          if (t.status === "succeeded") expect(needs.every((s) => s === "succeeded")).toBe(true);
          if (t.status === "skipped") expect(needs.some((s) => s !== "succeeded")).toBe(true);
        }
        for (const r of state.runs) {
          const outcome = deriveRunOutcome(
            r.status,
            state.tasks.filter((t) => t.runId === r.runId).map((t) => t.status),
          );
          expect(["succeeded", "failed"]).toContain(outcome);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("fan-outs in decideSchedule", () => {
  const run = { runId: "r", status: "running" as const, maxParallel: null };
  const t = (taskId: string, extra: Partial<ScheduleTask> = {}): ScheduleTask => ({
    runId: "r",
    taskId,
    status: "blocked",
    needs: [],
    priority: 0,
    seq: Number(taskId.replace(/\D/g, "")) || 0,
    concurrencyKey: null,
    ...extra,
  });
  const instance = (i: number, extra: Partial<ScheduleTask> = {}): ScheduleTask =>
    t(`d[item=${i}]`, { seq: 10 + i, fanOut: "d", fanOutLimit: 2, ...extra });

  it("expands a template whose needs succeeded instead of queueing it; one still waiting is left", () => {
    const d = decideSchedule(
      {
        runs: [run],
        tasks: [
          t("p1", { status: "succeeded" }),
          t("d2", { needs: ["p1"], isFanOut: true }),
          t("e3", { needs: ["x"], isFanOut: true }),
        ],
      },
      { globalCap: null },
    );
    expect(d.toExpand).toEqual([{ runId: "r", taskId: "d2" }]);
    expect(d.toQueue).toEqual([]);
  });

  it("admits at most a fan-out's max_parallel of its instances, counting the active ones, beside other tasks", () => {
    const tasks = [instance(0, { status: "running" }), instance(1), instance(2), instance(3), t("o5")];
    const d = decideSchedule({ runs: [run], tasks }, { globalCap: null });
    expect(d.toQueue.map((r) => r.taskId)).toEqual(["o5", "d[item=1]"]);
    // Another run's fan-out of the same id is counted apart.
    const other = { ...instance(4), runId: "r2" };
    const two = decideSchedule(
      { runs: [run, { ...run, runId: "r2" }], tasks: [...tasks, other] },
      { globalCap: null },
    );
    expect(two.toQueue.map((r) => `${r.runId}/${r.taskId}`)).toContain("r2/d[item=4]");
  });

  it("fail_fast: a failed or timed-out instance skips its fan-out's blocked and queued instances (and what needs them)", () => {
    for (const end of ["failed", "timed_out"] as const) {
      const d = decideSchedule(
        {
          runs: [run],
          tasks: [
            instance(0, { status: end, failFast: true }),
            instance(1, { status: "running", failFast: true }),
            instance(2, { status: "queued", failFast: true }),
            instance(3, { failFast: true }),
            t("z9", { needs: ["d[item=3]"] }),
          ],
        },
        { globalCap: null },
      );
      expect(d.toSkip.map((r) => r.taskId)).toEqual(["z9", "d[item=3]"]);
      expect(d.toStop).toEqual([{ runId: "r", taskId: "d[item=2]" }]);
      expect(d.toQueue).toEqual([]);
    }
  });

  it("without fail_fast, or after a success or a cancel, the others go on", () => {
    const d = decideSchedule(
      {
        runs: [run],
        tasks: [
          instance(0, { status: "failed" }),
          instance(1, { status: "canceled", failFast: true }),
          instance(2, { status: "queued" }),
          instance(3),
        ],
      },
      { globalCap: null },
    );
    expect(d.toSkip).toEqual([]);
    expect(d.toStop).toEqual([]);
    expect(d.toQueue).toEqual([{ runId: "r", taskId: "d[item=3]" }]);
  });
});

// ---- run conditions (`when`, run-when.ts) ----

describe("decideSchedule with run conditions", () => {
  const gate = { isGate: true, gateOpen: true };
  const decide = (tasks: ScheduleTask[]) => decideSchedule({ runs: [run("r")], tasks }, { globalCap: null });

  it("runs a when = failed cleanup only once every need ended and one failed", () => {
    const base = (b: TaskStatus, c: TaskStatus) => [
      task("r", "b", { status: b }),
      task("r", "c", { status: c }),
      task("r", "cleanup", { needs: ["b", "c"], when: "failed" }),
    ];
    expect(ids(decide(base("failed", "running")).toQueue)).toEqual([]);
    expect(ids(decide(base("failed", "running")).toSkip)).toEqual([]);
    expect(ids(decide(base("failed", "succeeded")).toQueue)).toEqual(["r/cleanup"]);
    expect(ids(decide(base("timed_out", "skipped")).toQueue)).toEqual(["r/cleanup"]);
    expect(ids(decide(base("succeeded", "succeeded")).toSkip)).toEqual(["r/cleanup"]);
    expect(ids(decide(base("succeeded", "skipped")).toSkip)).toEqual(["r/cleanup"]);
  });

  it("runs a when = denied branch only behind a denied approval gate, not a failed action", () => {
    const denied = decide([
      task("r", "ship", { status: "failed", ...gate }),
      task("r", "notify", { needs: ["ship"], when: "denied" }),
      task("r", "cleanup", { needs: ["ship"], when: "failed" }),
      task("r", "deploy", { needs: ["ship"] }),
    ]);
    expect(ids(denied.toQueue)).toEqual(["r/notify"]);
    expect(ids(denied.toSkip)).toEqual(["r/cleanup", "r/deploy"]);
    const approved = decide([
      task("r", "ship", { status: "succeeded", ...gate }),
      task("r", "notify", { needs: ["ship"], when: "denied" }),
    ]);
    expect(ids(approved.toSkip)).toEqual(["r/notify"]);
    const timedOut = decide([
      task("r", "ship", { status: "timed_out", ...gate }),
      task("r", "notify", { needs: ["ship"], when: "denied" }),
    ]);
    expect(ids(timedOut.toSkip)).toEqual(["r/notify"]);
  });

  it("runs a when = done task whatever its needs ended as, and waits while one has not", () => {
    for (const s of ["succeeded", "failed", "timed_out", "skipped", "canceled"] as const)
      expect(
        ids(decide([task("r", "a", { status: s }), task("r", "z", { needs: ["a"], when: "done" })]).toQueue),
      ).toEqual(["r/z"]);
    for (const s of ["queued", "running", "canceling"] as const)
      expect(decide([task("r", "a", { status: s }), task("r", "z", { needs: ["a"], when: "done" })])).toEqual(
        {
          toQueue: [],
          toSkip: [],
          toOpen: [],
          toExpand: [],
          toStop: [],
        },
      );
    // Behind a blocked need it waits too: the need itself is what is queued.
    expect(
      ids(
        decide([task("r", "a", { status: "blocked" }), task("r", "z", { needs: ["a"], when: "done" })])
          .toQueue,
      ),
    ).toEqual(["r/a"]);
  });

  it("reaches the fixed point through a chain: skips behind a failure let a cleanup run, a skipped cleanup skips its dependents", () => {
    const d = decide([
      task("r", "build", { status: "failed" }),
      task("r", "test", { needs: ["build"] }),
      task("r", "publish", { needs: ["test"] }),
      task("r", "cleanup", { needs: ["publish"], when: "done" }),
      task("r", "alarm", { needs: ["publish"], when: "failed" }),
      task("r", "after-alarm", { needs: ["alarm"] }),
      task("r", "after-all", { needs: ["after-alarm"], when: "done" }),
    ]);
    expect(ids(d.toQueue)).toEqual(["r/cleanup", "r/after-all"]);
    expect(ids(d.toSkip)).toEqual(["r/test", "r/publish", "r/alarm", "r/after-alarm"]);
  });

  it("opens a conditional approval gate when its condition is met, and moves nothing in a canceling run", () => {
    const d = decide([
      task("r", "a", { status: "failed" }),
      task("r", "rollback-ok", { needs: ["a"], when: "failed", isGate: true }),
    ]);
    expect(ids(d.toOpen)).toEqual(["r/rollback-ok"]);
    const canceling = decideSchedule(
      {
        runs: [run("r", { status: "canceling" })],
        tasks: [task("r", "a", { status: "failed" }), task("r", "z", { needs: ["a"], when: "done" })],
      },
      { globalCap: null },
    );
    expect(canceling).toEqual({ toQueue: [], toSkip: [], toOpen: [], toExpand: [], toStop: [] });
  });

  it("keeps the run's outcome honest: a failure stays failed after its cleanup, a skipped cleanup does not fail a run", () => {
    expect(deriveRunOutcome("running", ["failed", "succeeded"])).toBe("failed");
    expect(deriveRunOutcome("running", ["succeeded", "skipped"])).toBe("succeeded");
  });

  /** The rule restated naively: each blocked task of a running run judged from its needs, repeated until nothing changes. */
  function reference(snapshot: ScheduleSnapshot): { ready: Set<string>; skipped: Set<string> } {
    const status = new Map(snapshot.tasks.map((t) => [tkey(t), t.status]));
    const gateOf = new Map(snapshot.tasks.map((t) => [tkey(t), t.isGate === true]));
    const running = new Set(snapshot.runs.filter((r) => r.status === "running").map((r) => r.runId));
    const terminal = (s: TaskStatus | undefined) =>
      s !== undefined && ["succeeded", "failed", "timed_out", "canceled", "skipped"].includes(s);
    const judge = (t: ScheduleTask): "run" | "skip" | "wait" => {
      const needs = t.needs.map((n) => ({
        s: status.get(`${t.runId}/${n}`),
        gate: gateOf.get(`${t.runId}/${n}`) ?? false,
      }));
      const when = t.when ?? "succeeded";
      if (when === "succeeded") {
        if (needs.some((n) => n.s !== undefined && ENDS_BADLY.has(n.s))) return "skip";
        return needs.every((n) => n.s === "succeeded") ? "run" : "wait";
      }
      if (!needs.every((n) => terminal(n.s))) return "wait";
      if (when === "done") return "run";
      const denied = (n: { s?: TaskStatus; gate: boolean }) => n.gate && n.s === "failed";
      if (when === "denied") return needs.some(denied) ? "run" : "skip";
      return needs.some((n) => (n.s === "failed" || n.s === "timed_out") && !denied(n)) ? "run" : "skip";
    };
    const skipped = new Set<string>();
    for (let changed = true; changed;) {
      changed = false;
      for (const t of snapshot.tasks) {
        if (t.status !== "blocked" || !running.has(t.runId) || skipped.has(tkey(t))) continue;
        if (judge(t) === "skip") {
          skipped.add(tkey(t));
          status.set(tkey(t), "skipped");
          changed = true;
        }
      }
    }
    const ready = new Set(
      snapshot.tasks
        .filter(
          (t) =>
            t.status === "blocked" && running.has(t.runId) && !skipped.has(tkey(t)) && judge(t) === "run",
        )
        .map(tkey),
    );
    return { ready, skipped };
  }

  const conditionalRoomArb = fc
    .tuple(
      roomArb(taskStatusArb),
      fc.array(
        fc.constantFrom(undefined, undefined, "failed", "denied", "done") as fc.Arbitrary<
          ScheduleTask["when"]
        >,
        {
          minLength: 24,
          maxLength: 24,
        },
      ),
      fc.array(fc.boolean(), { minLength: 24, maxLength: 24 }),
    )
    .map(([room, whens, gates]) => ({
      ...room,
      snapshot: {
        ...room.snapshot,
        tasks: room.snapshot.tasks.map((t, i) => {
          const isGate = gates[i] === true && !ACTIVE.has(t.status) && i % 3 === 0;
          const when = whens[i];
          return {
            ...t,
            ...(isGate ? { isGate, concurrencyKey: null } : {}),
            ...(when !== undefined && t.needs.length > 0 ? { when } : {}),
          };
        }),
      },
    }));

  it("decides as the naive reference does on random rooms with conditions and denied gates", () => {
    fc.assert(
      fc.property(conditionalRoomArb, ({ snapshot, globalCap }) => {
        const d = decideSchedule(snapshot, { globalCap });
        const want = reference(snapshot);
        expect(new Set(d.toSkip.map(tkey))).toEqual(want.skipped);
        for (const r of [...d.toQueue, ...d.toOpen]) expect(want.ready.has(tkey(r)), tkey(r)).toBe(true);
        // Every ready gate not open yet is opened; caps aside, nothing ready is forgotten.
        const gatesReady = snapshot.tasks.filter(
          (t) => t.isGate === true && t.gateOpen !== true && want.ready.has(tkey(t)),
        );
        expect(new Set(d.toOpen.map(tkey))).toEqual(new Set(gatesReady.map(tkey)));
        if (globalCap === null) {
          const plain = snapshot.tasks.filter((t) => t.isGate !== true && want.ready.has(tkey(t)));
          const free = plain.filter((t) => t.concurrencyKey === null);
          const maxOf = (runId: string) => snapshot.runs.find((r) => r.runId === runId)?.maxParallel ?? null;
          for (const t of free)
            if (maxOf(t.runId) === null) expect(d.toQueue.map(tkey), tkey(t)).toContain(tkey(t));
        }
        // The fixed point: deciding again on the result finds nothing more to skip.
        expect(decideSchedule(apply(snapshot, d), { globalCap }).toSkip).toEqual([]);
      }),
      { numRuns: 400 },
    );
  });
});
