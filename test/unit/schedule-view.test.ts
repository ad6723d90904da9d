// The leader's incremental scheduling view against the whole-room reference: from any room, through
// any sequence of claims and task ends, the view decides exactly what decideSchedule decides on the
// room as it then is, and says so when it is handed a change it cannot explain.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import type { ActiveTask } from "../../src/domain/schedule-view.js";
import { ScheduleView } from "../../src/domain/schedule-view.js";
import type { ScheduleDecision, ScheduleSnapshot, ScheduleTask } from "../../src/domain/scheduling.js";
import { decideSchedule } from "../../src/domain/scheduling.js";

const ACTIVE = new Set<TaskStatus>(["queued", "running", "canceling"]);
const ENDS = ["succeeded", "succeeded", "succeeded", "failed", "timed_out", "canceled"] as const;
// Rooms carry run conditions (`when`) and gates that ended failed (denied) too: the view judges
// conditional tasks as decideSchedule does, whether their needs end by a worker or a skip.

const activeOf = (tasks: readonly ScheduleTask[]): ActiveTask[] =>
  tasks
    .filter((t) => ACTIVE.has(t.status))
    .map((t) => ({
      runId: t.runId,
      taskId: t.taskId,
      concurrencyKey: t.concurrencyKey,
      fanOut: t.fanOut ?? null,
    }));

/** Writes a decision into the room as the store would. */
function apply(tasks: ScheduleTask[], d: ScheduleDecision): void {
  const find = (r: { runId: string; taskId: string }): ScheduleTask =>
    tasks.find((t) => t.runId === r.runId && t.taskId === r.taskId)!;
  for (const r of d.toSkip) find(r).status = "skipped";
  for (const r of d.toQueue) find(r).status = "queued";
  for (const r of d.toOpen) find(r).gateOpen = true;
}

const runArb = (runId: string) =>
  fc
    .record({
      status: fc.constantFrom<RunStatus>("running", "running", "running", "pending", "canceling"),
      maxParallel: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
      tasks: fc.array(
        fc.record({
          status: fc.constantFrom<TaskStatus>(
            "blocked",
            "blocked",
            "blocked",
            "succeeded",
            "queued",
            "running",
            "failed",
          ),
          needMask: fc.integer({ min: 0, max: 255 }),
          missingNeed: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
          priority: fc.integer({ min: 0, max: 2 }),
          concurrencyKey: fc.option(fc.constantFrom("k1", "k2", "k3"), { nil: null, freq: 2 }),
          gate: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
          // An instance of fan-out g1 (at most 1 active) or g2 (at most 2), or no fan-out.
          fanOut: fc.option(fc.constantFrom("g1", "g2"), { nil: null, freq: 2 }),
          when: fc.constantFrom(undefined, undefined, undefined, "failed", "denied", "done") as fc.Arbitrary<
            ScheduleTask["when"]
          >,
        }),
        { minLength: 1, maxLength: 10 },
      ),
    })
    .map(({ status, maxParallel, tasks }) => ({
      run: { runId, status, maxParallel },
      tasks: tasks.map((t, i): ScheduleTask => ({
        runId,
        taskId: `t${i}`,
        // A gate is never active: it is blocked (open or not) or ended.
        status: t.gate && ACTIVE.has(t.status) ? "blocked" : t.status,
        needs: [
          ...Array.from({ length: i }, (_, j) => j)
            .filter((j) => (t.needMask >> j) & 1)
            .map((j) => `t${j}`),
          ...(t.missingNeed ? ["nowhere"] : []),
        ],
        priority: t.priority,
        seq: 0,
        concurrencyKey: t.gate ? null : t.concurrencyKey,
        isGate: t.gate,
        gateOpen: false,
        ...(t.gate || t.fanOut === null ? {} : { fanOut: t.fanOut, fanOutLimit: t.fanOut === "g1" ? 1 : 2 }),
        ...(t.when !== undefined ? { when: t.when } : {}),
      })),
    }));

const roomArb = fc
  .record({
    runs: fc.tuple(runArb("ra"), runArb("rb"), runArb("rc")),
    count: fc.integer({ min: 1, max: 3 }),
    seqs: fc.array(fc.integer(), { minLength: 30, maxLength: 30 }),
    globalCap: fc.option(fc.integer({ min: 0, max: 6 }), { nil: null }),
    // Each step: how many active tasks end, and a seed for which and how.
    steps: fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 1_000_000 })), {
      maxLength: 30,
    }),
  })
  .map(({ runs, count, seqs, globalCap, steps }) => {
    const chosen = runs.slice(0, count);
    const tasks = chosen.flatMap((r) => r.tasks);
    const order = tasks.map((_, i) => i).sort((a, b) => (seqs[a] ?? 0) - (seqs[b] ?? 0) || a - b);
    order.forEach((idx, rank) => {
      tasks[idx]!.seq = rank + 1;
    });
    return { runs: chosen.map((r) => r.run), tasks, globalCap, steps };
  });

describe("ScheduleView", () => {
  it("decides as decideSchedule does on the whole room, through any sequence of task ends", () => {
    fc.assert(
      fc.property(roomArb, ({ runs, tasks, globalCap, steps }) => {
        const caps = { globalCap };
        const snapshot = (): ScheduleSnapshot => ({ runs, tasks: tasks.map((t) => ({ ...t })) });
        // A whole pass: the reference decides, the view is built from the same snapshot.
        const first = decideSchedule(snapshot(), caps);
        const view = new ScheduleView(snapshot());
        expect(view.decide(activeOf(tasks), caps)).toEqual(first);
        apply(tasks, first);
        view.applied(first);
        for (const [ending, seed] of steps) {
          // Some active tasks are claimed (no change the view needs) and some end.
          const active = tasks.filter((t) => ACTIVE.has(t.status));
          const ended = active.slice(0, ending).map((t, i) => {
            t.status = ENDS[(seed >> i) % ENDS.length]!;
            return { runId: t.runId, taskId: t.taskId, status: t.status };
          });
          const storeActive = activeOf(tasks);
          const left = view.left(storeActive);
          const names = (refs: ReadonlyArray<{ runId: string; taskId: string }>): string[] =>
            refs.map((r) => `${r.runId}/${r.taskId}`).sort();
          expect(left === null ? null : names(left)).toEqual(names(ended));
          expect(view.ended(ended)).toBe(true);
          const want = decideSchedule(snapshot(), caps);
          expect(view.decide(storeActive, caps)).toEqual(want);
          apply(tasks, want);
          view.applied(want);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("keeps a room of 1,000 ready tasks behind a cap of 8 to the cap's own work per pass", () => {
    const tasks: ScheduleTask[] = Array.from({ length: 1000 }, (_, i) => ({
      runId: "r",
      taskId: `t${i}`,
      status: "blocked",
      needs: [],
      priority: 0,
      seq: i + 1,
      concurrencyKey: null,
    }));
    const runs = [{ runId: "r", status: "running" as const, maxParallel: null }];
    const view = new ScheduleView({ runs, tasks });
    const caps = { globalCap: 8 };
    let first = view.decide([], caps);
    expect(first.toQueue.map((r) => r.taskId)).toEqual(["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
    view.applied(first);
    // t0 ends: exactly one slot frees, and the next in creation order takes it.
    const active = first.toQueue.slice(1).map((r) => ({ ...r, concurrencyKey: null }));
    expect(view.left(active)).toEqual([{ runId: "r", taskId: "t0" }]);
    expect(view.ended([{ runId: "r", taskId: "t0", status: "succeeded" }])).toBe(true);
    first = view.decide(active, caps);
    expect(first.toQueue).toEqual([{ runId: "r", taskId: "t8" }]);
  });

  it("says it cannot follow a change it did not see: an unknown active task, a task back to blocked", () => {
    const tasks: ScheduleTask[] = [
      { runId: "r", taskId: "a", status: "running", needs: [], priority: 0, seq: 1, concurrencyKey: null },
      { runId: "r", taskId: "b", status: "blocked", needs: ["a"], priority: 0, seq: 2, concurrencyKey: null },
    ];
    const runs = [{ runId: "r", status: "running" as const, maxParallel: null }];
    const view = new ScheduleView({ runs, tasks });
    // b active although the view never queued it: some other writer moved it.
    expect(view.left([{ runId: "r", taskId: "b", concurrencyKey: null }])).toBeNull();
    expect(view.ended([{ runId: "r", taskId: "a", status: "blocked" }])).toBe(false);
    expect(view.ended([{ runId: "r", taskId: "b", status: "succeeded" }])).toBe(false);
    expect(view.sameRuns([{ runId: "r", status: "canceling", maxParallel: null }])).toBe(false);
    expect(view.sameRuns([{ runId: "r", status: "running", maxParallel: 2 }])).toBe(false);
    expect(view.sameRuns([...runs, { runId: "s", status: "running", maxParallel: null }])).toBe(false);
    expect(view.sameRuns(runs)).toBe(true);
  });
});
