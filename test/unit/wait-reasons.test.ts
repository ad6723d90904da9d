// Why a task waits: examples of each reason, then properties against the scheduler's own decision.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RunStatus, TaskStatus } from "../../src/domain/model.js";
import { RUN_STATUSES, TASK_STATUSES } from "../../src/domain/model.js";
import type { ScheduleTask } from "../../src/domain/scheduling.js";
import { decideSchedule } from "../../src/domain/scheduling.js";
import { ACTIVE_TASK_STATUSES } from "../../src/domain/task-states.js";
import type { WaitFacts, WaitNode, WaitTask } from "../../src/domain/wait-reasons.js";
import { explainWaits, groupWaits, waitsLine, waitText } from "../../src/domain/wait-reasons.js";

function task(taskId: string, over: Partial<WaitTask> = {}): WaitTask {
  return {
    taskId,
    status: "blocked",
    needs: [],
    action: "echo",
    on: { labels: [], node: null },
    concurrencyKey: null,
    notBefore: null,
    ...over,
  };
}
const node = (nodeId: string, over: Partial<WaitNode> = {}): WaitNode => ({
  nodeId,
  actions: ["echo"],
  labels: [],
  free: 1,
  ...over,
});
function facts(tasks: WaitTask[], over: Partial<WaitFacts> = {}): WaitFacts {
  return {
    runStatus: "running",
    maxParallel: null,
    tasks,
    roomCap: 16,
    roomActive: tasks.filter((t) => ACTIVE_TASK_STATUSES.has(t.status)).length,
    keysHeld: [],
    nodes: [node("n1")],
    now: 1_000,
    ...over,
  };
}
const texts = (f: WaitFacts): Record<string, string> =>
  Object.fromEntries([...explainWaits(f)].map(([id, r]) => [id, waitText(r)]));

describe("explainWaits examples", () => {
  it("a pending run's tasks await confirmation", () => {
    expect(texts(facts([task("a"), task("b", { needs: ["a"] })], { runStatus: "pending" }))).toEqual({
      a: "awaits confirmation",
      b: "awaits confirmation",
    });
  });

  it("a task with a run condition waits for its needs to end, and says its condition", () => {
    const f = facts([
      task("build", { status: "failed" }),
      task("test", { status: "running" }),
      task("cleanup", { needs: ["build", "test"], when: "failed" }),
      task("always", { needs: ["build"], when: "done" }),
      task("notify", { needs: ["test"], when: "denied" }),
    ]);
    expect(explainWaits(f).get("cleanup")).toEqual({ kind: "needs", tasks: ["test"], when: "failed" });
    expect(texts(f)).toEqual({
      cleanup: "waits for `test` to end; runs if one failed",
      notify: "waits for `test` to end; runs if an approval was denied",
    });
  });

  it("names the needs that have not succeeded, in the task's order", () => {
    const f = facts([
      task("a", { status: "succeeded" }),
      task("b", { status: "running" }),
      task("c"),
      task("d", { needs: ["c", "a", "b"] }),
    ]);
    expect(texts(f)).toEqual({ d: "needs `c`, `b`" });
    expect(explainWaits(f).get("d")).toEqual({ kind: "needs", tasks: ["c", "b"] });
  });

  it("a ready task of a room with cap 0 waits for the paused room, not for the cap", () => {
    expect(texts(facts([task("a")], { roomCap: 0 }))).toEqual({ a: "room paused (cap 0)" });
  });

  it("the room's cap, then the run's max_parallel, then the key", () => {
    const held = [{ key: "s3", dagId: "other.2", taskId: "upload" }];
    const t = task("a", { concurrencyKey: "s3" });
    expect(texts(facts([t], { roomCap: 2, roomActive: 2, keysHeld: held }))).toEqual({
      a: "room cap reached (2 active)",
    });
    const busy = [task("x", { status: "running" }), t];
    expect(texts(facts(busy, { maxParallel: 1, keysHeld: held }))).toEqual({
      a: "the run's max_parallel reached (1 active)",
    });
    expect(texts(facts([t], { keysHeld: held }))).toEqual({
      a: "concurrency key `s3` held by `other.2/upload`",
    });
  });

  it("a fan-out's template waits for its producer's list; an instance for its fan-out's max_parallel", () => {
    const forEach = { producer: "discover", output: "hosts", maxParallel: 2, failFast: false };
    expect(
      texts(
        facts([
          task("discover", { status: "running" }),
          task("other", { status: "running" }),
          task("deploy", { needs: ["discover"], forEach }),
          task("both", { needs: ["discover", "other"], forEach }),
        ]),
      ),
    ).toEqual({
      deploy: "fans out over the list `hosts` of `discover` once it succeeds",
      both: "needs `discover`, `other`",
    });
    // Its producer succeeded: it is expanded at the next step, whatever the caps.
    expect(
      texts(
        facts([task("discover", { status: "succeeded" }), task("deploy", { needs: ["discover"], forEach })], {
          roomCap: 0,
        }),
      ),
    ).toEqual({});
    const instance = (i: number, status: TaskStatus) =>
      task(`deploy[item=${i}]`, { status, fanOut: "deploy", fanOutLimit: 2 });
    expect(
      texts(
        facts([
          instance(0, "running"),
          instance(1, "queued"),
          instance(2, "blocked"),
          instance(3, "succeeded"),
        ]),
      ),
    ).toEqual({ "deploy[item=2]": "fan-out `deploy`'s max_parallel reached (2 active)" });
    expect(texts(facts([instance(0, "running"), instance(1, "succeeded"), instance(2, "blocked")]))).toEqual(
      {},
    );
  });

  it("a ready task nothing holds has no reason: the leader has not moved it yet", () => {
    expect(explainWaits(facts([task("a", { concurrencyKey: "free" })])).size).toBe(0);
  });

  it("a queued task waits for a live node offering its action, labels and pin", () => {
    const q = (over: Partial<WaitTask>): WaitTask => task("q", { status: "queued", ...over });
    expect(texts(facts([q({ action: "deploy" })]))).toEqual({ q: "no live node offers action `deploy`" });
    expect(texts(facts([q({ on: { labels: ["gpu", "big"], node: null } })]))).toEqual({
      q: "no live node with labels `gpu`, `big` offers action `echo`",
    });
    expect(texts(facts([q({ on: { labels: [], node: "n9" } })]))).toEqual({
      q: "no live node `n9` offers action `echo`",
    });
    expect(texts(facts([q({})], { nodes: [] }))).toEqual({ q: "no live node offers action `echo`" });
    expect(texts(facts([q({})], { nodes: [node("n1", { free: 0 })] }))).toEqual({
      q: "its one fitting node is busy",
    });
    expect(texts(facts([q({ notBefore: 5_000 })]))).toEqual({ q: "retry backoff" });
    expect(explainWaits(facts([q({})])).size).toBe(0);
    expect(explainWaits(facts([q({ action: "deploy" })], { nodes: null })).size).toBe(0);
  });

  it("running, ended and canceling-run tasks never wait", () => {
    const all = TASK_STATUSES.map((s) => task(`t_${s}`, { status: s, action: "nowhere" }));
    const reasons = explainWaits(facts(all, { nodes: [], roomCap: 0 }));
    expect([...reasons.keys()].sort()).toEqual(["t_blocked", "t_queued"]);
    expect(explainWaits(facts(all, { runStatus: "canceling", nodes: [] })).size).toBe(0);
  });

  it("groups a run's waits into one line, leaving needs out", () => {
    const f = facts(
      [
        task("a", { status: "queued", action: "deploy" }),
        task("b", { status: "queued", action: "deploy" }),
        task("c", { concurrencyKey: "k" }),
        task("d", { needs: ["a"] }),
      ],
      { keysHeld: [{ key: "k", dagId: "x", taskId: "y" }] },
    );
    expect(waitsLine(groupWaits(explainWaits(f)))).toBe(
      "2 tasks wait: no live node offers action `deploy`; 1 task waits: concurrency key `k` held by `x/y`",
    );
    expect(waitsLine([])).toBe("");
  });
});

// --- Properties: the reasons agree with what decideSchedule and a claim would do ----------------

const ids = ["a", "b", "c", "d", "e", "f"];
const statusArb = fc.constantFrom<TaskStatus>(...TASK_STATUSES);
const taskArb = (taskId: string, i: number): fc.Arbitrary<WaitTask & { priority: number }> =>
  fc.record({
    taskId: fc.constant(taskId),
    status: statusArb,
    needs: fc.subarray(ids.slice(0, i)),
    action: fc.constantFrom("echo", "deploy"),
    on: fc.record({
      labels: fc.subarray(["gpu", "ssd"]),
      node: fc.option(fc.constantFrom("n1", "n2"), { nil: null }),
    }),
    concurrencyKey: fc.option(fc.constantFrom("k1", "k2"), { nil: null }),
    notBefore: fc.option(fc.integer({ min: 0, max: 2_000 }), { nil: null }),
    priority: fc.integer({ min: 0, max: 2 }),
    // A run condition (run-when.ts) on some: such a task waits for its needs to end.
    when: fc.option(fc.constantFrom("failed" as const, "denied" as const, "done" as const), {
      nil: undefined,
      freq: 3,
    }),
  });
const nodeArb = fc.record({
  nodeId: fc.constantFrom("n1", "n2", "n3"),
  actions: fc.subarray(["echo", "deploy"]),
  labels: fc.subarray(["gpu", "ssd"]),
  free: fc.integer({ min: -1, max: 2 }),
});
/** Active tasks of other runs of the room: they count against the cap and may hold keys. */
const otherArb = fc.array(
  fc.record({
    status: fc.constantFrom<TaskStatus>("queued", "running", "canceling"),
    concurrencyKey: fc.option(fc.constantFrom("k1", "k2"), { nil: null }),
  }),
  { maxLength: 4 },
);
const roomArb = fc.record({
  runStatus: fc.constantFrom<RunStatus>(...RUN_STATUSES),
  maxParallel: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
  tasks: fc.tuple(...ids.map((id, i) => taskArb(id, i))),
  roomCap: fc.integer({ min: 0, max: 6 }),
  others: otherArb,
  nodes: fc.option(fc.array(nodeArb, { maxLength: 3 }), { nil: null }),
  now: fc.constant(1_000),
});
type Room = typeof roomArb extends fc.Arbitrary<infer R> ? R : never;

function factsOf(room: Room): WaitFacts {
  const active = [...room.tasks, ...room.others].filter((t) => ACTIVE_TASK_STATUSES.has(t.status));
  return {
    runStatus: room.runStatus,
    maxParallel: room.maxParallel,
    tasks: room.tasks,
    roomCap: room.roomCap,
    roomActive: active.length,
    keysHeld: active.flatMap((t, i) =>
      t.concurrencyKey === null ? [] : [{ key: t.concurrencyKey, dagId: "r", taskId: `t${i}` }],
    ),
    nodes: room.nodes,
    now: room.now,
  };
}

function scheduleOf(room: Room): ReturnType<typeof decideSchedule> {
  const tasks: ScheduleTask[] = [
    ...room.tasks.map((t, i) => ({ ...t, runId: "r", seq: i })),
    ...room.others.map((t, i) => ({
      ...t,
      runId: "other",
      taskId: `o${i}`,
      needs: [],
      priority: 0,
      seq: 100 + i,
    })),
  ];
  return decideSchedule(
    {
      runs: [
        { runId: "r", status: room.runStatus, maxParallel: room.maxParallel },
        { runId: "other", status: "running", maxParallel: null },
      ],
      tasks,
    },
    { globalCap: room.roomCap },
  );
}

describe("explainWaits properties", () => {
  it("only blocked and queued tasks of pending or running runs get a reason", () => {
    fc.assert(
      fc.property(roomArb, (room) => {
        for (const [id, reason] of explainWaits(factsOf(room))) {
          const t = room.tasks.find((x) => x.taskId === id);
          expect(t?.status === "blocked" || t?.status === "queued").toBe(true);
          expect(room.runStatus === "pending" || room.runStatus === "running").toBe(true);
          expect(reason.kind === "confirmation").toBe(room.runStatus === "pending");
        }
      }),
    );
  });

  it("the scheduler never queues a blocked task that has a reason", () => {
    fc.assert(
      fc.property(roomArb, (room) => {
        const reasons = explainWaits(factsOf(room));
        for (const q of scheduleOf(room).toQueue) {
          if (q.runId === "r") expect(reasons.get(q.taskId)).toBeUndefined();
        }
      }),
    );
  });

  it("when the scheduler admits nothing, every blocked task of a running run has a reason", () => {
    fc.assert(
      fc.property(roomArb, (room) => {
        const decision = scheduleOf(room);
        if (room.runStatus !== "running" || decision.toQueue.length > 0) return;
        const reasons = explainWaits(factsOf(room));
        // A task skipped in this very decision does not wait (a conditional one whose condition is
        // not met has no need left to wait for).
        const skipped = new Set(decision.toSkip.filter((s) => s.runId === "r").map((s) => s.taskId));
        for (const t of room.tasks)
          if (t.status === "blocked" && !skipped.has(t.taskId))
            expect(reasons.get(t.taskId), t.taskId).toBeDefined();
      }),
    );
  });

  it("a queued task has a node reason exactly when no live node could claim it now", () => {
    fc.assert(
      fc.property(roomArb, (room) => {
        if (room.runStatus !== "running" || room.nodes === null) return;
        const reasons = explainWaits(factsOf(room));
        for (const t of room.tasks) {
          if (t.status !== "queued" || (t.notBefore !== null && t.notBefore > room.now)) continue;
          const claimable = room.nodes.some(
            (n) =>
              n.free > 0 &&
              n.actions.includes(t.action) &&
              t.on.labels.every((l) => n.labels.includes(l)) &&
              (t.on.node === null || t.on.node === n.nodeId),
          );
          const kind = reasons.get(t.taskId)?.kind;
          expect(kind === "no-node" || kind === "nodes-busy").toBe(!claimable);
        }
      }),
    );
  });
});
