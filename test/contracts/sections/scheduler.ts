/**
 * Store contract: the leader's scheduling and reaping. scheduleStep promotes ready tasks within the
 * room's global cap (default 16, changeable at run time), the run's max_parallel and one active task
 * per concurrency_key, in priority then FIFO order, and skips what sits behind a task that ended
 * badly; reap handles expired leases, deadlines, queue timeouts, canceling tasks and unconfirmed
 * runs; deriveRunOutcomes ends runs from their task sets.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { ParsedDag } from "../../../src/domain/model.js";
import type { LeaderFence, RunRecord, Store, TaskRecord } from "../../../src/ports/store.js";
import {
  becomeLeader,
  cmd,
  dag,
  failed,
  offer,
  ok,
  runInput,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const LONG_LEASE = 60 * 60_000;

export function schedulerSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!sched");
    const fence = await becomeLeader(store, room);
    // The clock jumps of these tests must not depose the leader.
    await store.renewLease(fence, LONG_LEASE);
    return { store, room, fence };
  };

  const create = async (store: Store, fence: LeaderFence, d: ParsedDag): Promise<RunRecord> => {
    const r = await store.createRun(cmd(fence), runInput(fence.roomId, d));
    if (r.kind !== "created") throw new Error(`expected created, got ${r.kind}`);
    return r.run;
  };

  const statuses = async (store: Store, run: RunRecord): Promise<Record<string, string>> =>
    Object.fromEntries((await store.listTasks(run.runId)).map((t) => [t.taskId, t.status]));

  const withStatus = async (store: Store, runs: RunRecord[], status: string): Promise<TaskRecord[]> =>
    (await Promise.all(runs.map((r) => store.listTasks(r.runId)))).flat().filter((t) => t.status === status);

  it("queues the tasks whose needs all succeeded, leaves the rest blocked; pending runs wait", async () => {
    const { store, room, fence } = await setup();
    const run = await create(
      store,
      fence,
      dag(ctx.uid("chain"), [task("a"), task("b", { needs: ["a"] }), task("c")]),
    );
    const waiting = await store.createRun(
      cmd(fence),
      runInput(room, dag(ctx.uid("pending"), [task("p")]), { needsConfirmation: true }),
    );
    if (waiting.kind !== "created") throw new Error(`expected created, got ${waiting.kind}`);
    expect(await store.scheduleStep(fence)).toEqual({ queued: 2, skipped: 0 });
    expect(await statuses(store, run)).toEqual({ a: "queued", b: "blocked", c: "queued" });
    expect((await store.getTask(waiting.run.runId, "p"))?.status).toBe("blocked");
    const a = await store.getTask(run.runId, "a");
    expect(a?.version).toBe(2);
    expect(a?.queuedAt).toBe(ctx.clock.now());
    // Nothing new is ready: a second step changes nothing.
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 0 });
    const w = session("w");
    const claimed = await store.claimTask(offer(w, [room]));
    await store.finishTask(claimed!.token, ok);
    const other = await store.claimTask(offer(w, [room]));
    await store.finishTask(other!.token, ok);
    expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 0 });
    expect((await store.getTask(run.runId, "b"))?.status).toBe("queued");
  });

  it("the room's global cap counts queued, running and canceling tasks; 16 when never set", async () => {
    const { store, room, fence } = await setup();
    expect(await store.getRoomCap(room)).toBe(16);
    const big = await create(
      store,
      fence,
      dag(
        ctx.uid("wide"),
        Array.from({ length: 20 }, (_, i) => task(`t${i}`)),
      ),
    );
    expect(await store.scheduleStep(fence)).toEqual({ queued: 16, skipped: 0 });
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 0 });
    const w = session("w");
    const c = await store.claimTask(offer(w, [room]));
    // Claiming moves a task from queued to running: still active, no room freed.
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 0 });
    await store.finishTask(c!.token, ok);
    expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 0 });
    expect(await withStatus(store, [big], "queued")).toHaveLength(16);
  });

  it("a cap changed at run time: raising queues more at the next step, lowering never touches running or queued tasks", async () => {
    const { store, room, fence } = await setup();
    await store.setRoomCap(room, 2, { fence: fence });
    expect(await store.getRoomCap(room)).toBe(2);
    const run = await create(
      store,
      fence,
      dag(
        ctx.uid("wide"),
        Array.from({ length: 8 }, (_, i) => task(`t${i}`)),
      ),
    );
    expect((await store.scheduleStep(fence)).queued).toBe(2);
    const w = session("w");
    const first = await store.claimTask(offer(w, [room]));
    const second = await store.claimTask(offer(w, [room]));
    expect(first).not.toBeNull();
    expect(second).not.toBeNull();

    await store.setRoomCap(room, 5, { fence: fence });
    expect((await store.scheduleStep(fence)).queued).toBe(3);
    expect(await withStatus(store, [run], "running")).toHaveLength(2);
    expect(await withStatus(store, [run], "queued")).toHaveLength(3);

    await store.setRoomCap(room, 1, { fence: fence });
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 0 });
    expect(await withStatus(store, [run], "running")).toHaveLength(2);
    expect(await withStatus(store, [run], "queued")).toHaveLength(3);
    // The running tasks' executors are untouched: they renew and finish as usual.
    await store.renewTaskLease(first!.token, 30_000);
    await store.finishTask(first!.token, ok);
    // 4 active > cap 1: still nothing admitted.
    expect((await store.scheduleStep(fence)).queued).toBe(0);

    await store.setRoomCap(room, 0, { fence: fence });
    await store.setRoomCap(room, 8, { fence: fence });
    expect((await store.scheduleStep(fence)).queued).toBe(3);
    await expect(store.setRoomCap(room, -1, { fence: fence })).rejects.toThrow(RangeError);
    await expect(store.setRoomCap(room, 1.5)).rejects.toThrow(RangeError);
    expect(await store.getRoomCap(room)).toBe(8);
  });

  it("initRoomCap sets a cap only where none was ever set; a cap changed at run time survives it", async () => {
    const { store, room, fence } = await setup();
    expect(await store.initRoomCap(room, 4)).toBe(true);
    expect(await store.getRoomCap(room)).toBe(4);
    // A second node starting with another configured cap does not override the first.
    expect(await store.initRoomCap(room, 9)).toBe(false);
    expect(await store.getRoomCap(room)).toBe(4);
    await store.setRoomCap(room, 2, { fence: fence });
    expect(await store.initRoomCap(room, 9)).toBe(false);
    expect(await store.getRoomCap(room)).toBe(2);
    const initial = (await store.readEvents(room, 0)).filter((e) => e.kind === "cap.set");
    expect(initial.map((e) => e.data["cap"])).toEqual([4, 2]);
    await expect(store.initRoomCap(room, -1)).rejects.toThrow(RangeError);
  });

  it("a run's max_parallel caps that run only; other runs are admitted in the same step", async () => {
    const { store, fence } = await setup();
    const capped = await create(
      store,
      fence,
      dag(
        ctx.uid("capped"),
        Array.from({ length: 4 }, (_, i) => task(`c${i}`)),
        { maxParallel: 2 },
      ),
    );
    const free = await create(store, fence, dag(ctx.uid("free"), [task("f0"), task("f1"), task("f2")]));
    expect(await store.scheduleStep(fence)).toEqual({ queued: 5, skipped: 0 });
    expect(await withStatus(store, [capped], "queued")).toHaveLength(2);
    expect(await withStatus(store, [free], "queued")).toHaveLength(3);
  });

  it("one active task per concurrency_key across runs, the others wait first in, first out", async () => {
    const { store, room, fence } = await setup();
    const r1 = await create(
      store,
      fence,
      dag(ctx.uid("k1"), [
        task("s3a", { concurrencyKey: "s3" }),
        task("s3b", { concurrencyKey: "s3" }),
        task("free"),
      ]),
    );
    const r2 = await create(store, fence, dag(ctx.uid("k2"), [task("s3c", { concurrencyKey: "s3" })]));
    expect(await store.scheduleStep(fence)).toEqual({ queued: 2, skipped: 0 });
    expect(await statuses(store, r1)).toEqual({ s3a: "queued", s3b: "blocked", free: "queued" });
    const w = session("w");
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await store.claimTask(offer(w, [room], { labels: [] }));
      expect(c).not.toBeNull();
      order.push(c!.task.taskId);
      await store.finishTask(c!.token, ok);
      await store.scheduleStep(fence);
    }
    const last = await store.claimTask(offer(w, [room]));
    order.push(last!.task.taskId);
    expect(order.filter((t) => t.startsWith("s3"))).toEqual(["s3a", "s3b", "s3c"]);
    expect((await store.getTask(r2.runId, "s3c"))?.status).toBe("running");
  });

  it("roomLoad: the room's cap, its active tasks and the concurrency keys they hold, with their DAG ids", async () => {
    const { store, room, fence } = await setup();
    expect(await store.roomLoad(room)).toEqual({ cap: 16, active: 0, keys: [] });
    const id1 = ctx.uid("load1");
    const r1 = await create(
      store,
      fence,
      dag(id1, [task("a", { concurrencyKey: "s3" }), task("b", { concurrencyKey: "s3" }), task("c")]),
    );
    await create(store, fence, dag(ctx.uid("load2"), [task("d", { concurrencyKey: "s3" })]));
    await store.scheduleStep(fence);
    await store.setRoomCap(room, 5);
    // a and c are queued; b and d wait behind a's key and are not counted.
    expect(await store.roomLoad(room)).toEqual({
      cap: 5,
      active: 2,
      keys: [{ key: "s3", dagId: id1, taskId: "a" }],
    });
    const c = await store.claimTask(offer(session("w"), [room], { labels: [] }));
    expect(c?.task.taskId).toBe("a");
    expect((await store.roomLoad(room)).active).toBe(2);
    await store.finishTask(c!.token, ok);
    expect(await store.roomLoad(room)).toEqual({ cap: 5, active: 1, keys: [] });
    // Another room's tasks never count.
    expect(await store.roomLoad(ctx.uid("!other"))).toEqual({ cap: 16, active: 0, keys: [] });
    expect(await statuses(store, r1)).toMatchObject({ a: "succeeded", b: "blocked" });
  });

  it("admits in priority order, then first in first out, when the cap allows one at a time", async () => {
    const { store, room, fence } = await setup();
    await store.setRoomCap(room, 1, { fence: fence });
    await create(store, fence, dag(ctx.uid("p1"), [task("zero"), task("five-a", { priority: 5 })]));
    await create(
      store,
      fence,
      dag(ctx.uid("p2"), [task("one", { priority: 1 }), task("five-b", { priority: 5 })]),
    );
    const w = session("w");
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      expect((await store.scheduleStep(fence)).queued).toBe(1);
      const c = await store.claimTask(offer(w, [room]));
      order.push(c!.task.taskId);
      await store.finishTask(c!.token, ok);
    }
    expect(order).toEqual(["five-a", "five-b", "one", "zero"]);
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 0 });
  });

  it("skips everything behind a failed task in one step, and nothing beside it", async () => {
    const { store, room, fence } = await setup();
    const run = await create(
      store,
      fence,
      dag(ctx.uid("skip"), [
        task("a"),
        task("ok"),
        task("b", { needs: ["a"] }),
        task("c", { needs: ["b"] }),
        task("both", { needs: ["a", "ok"] }),
        task("after-ok", { needs: ["ok"] }),
      ]),
    );
    await store.scheduleStep(fence);
    const w = session("w");
    for (
      let c = await store.claimTask(offer(w, [room]));
      c !== null;
      c = await store.claimTask(offer(w, [room]))
    )
      await store.finishTask(c.token, c.task.taskId === "a" ? failed : ok);
    expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 3 });
    expect(await statuses(store, run)).toEqual({
      a: "failed",
      ok: "succeeded",
      b: "skipped",
      c: "skipped",
      both: "skipped",
      "after-ok": "queued",
    });
    const c = await store.getTask(run.runId, "c");
    expect(c?.finishedAt).toBe(ctx.clock.now());
  });

  it("incremental steps between claims and finishes decide exactly as whole steps do (twin rooms, same story)", async () => {
    const store = await ctx.store();
    const shape = (id: string): ParsedDag =>
      dag(
        id,
        [
          task("a", { priority: 1 }),
          task("b", { needs: ["a"] }),
          task("c"),
          task("d", { needs: ["b", "c"] }),
          task("e", { concurrencyKey: ctx.uid("k") }),
          task("f", { needs: ["c"], priority: 2 }),
          task("g", { needs: ["e"] }),
          task("h", { needs: ["g"] }),
          task("i", { needs: ["d", "f"] }),
          task("j"),
          task("k", { needs: ["j"] }),
        ],
        { maxParallel: 2 },
      );
    const story = async (incremental: boolean): Promise<string[]> => {
      const room = ctx.uid(incremental ? "!twin-inc" : "!twin-whole");
      const fence = await becomeLeader(store, room);
      await store.renewLease(fence, LONG_LEASE);
      await store.setRoomCap(room, 3, { fence });
      const run = await create(store, fence, shape(ctx.uid("twin")));
      // The second run of the room: the caps are shared, the keys held across runs.
      const other = await create(
        store,
        fence,
        dag(ctx.uid("twin2"), [task("x"), task("y", { needs: ["x"] })]),
      );
      const w = session("w");
      const trace: string[] = [];
      // The first step of a leader is always whole; then one task ends per step.
      let step = await store.scheduleStep(fence);
      for (let i = 0; i < 30; i++) {
        const all = { ...(await statuses(store, run)), ...(await statuses(store, other)) };
        trace.push(`${JSON.stringify(step)} ${JSON.stringify(all)}`);
        const c = await store.claimTask(offer(w, [room]));
        if (c === null) break;
        // e fails: g and h are skipped behind it; everything else succeeds.
        await store.finishTask(c.token, c.task.taskId === "e" ? failed : ok);
        step = await store.scheduleStep(fence, incremental);
      }
      return trace;
    };
    const whole = await story(false);
    const incremental = await story(true);
    expect(whole.length).toBeGreaterThan(10);
    expect(incremental).toEqual(whole);
    expect(whole.at(-1)).toContain('"g":"skipped","h":"skipped"');
  });

  it("an incremental step never queues a task whose needs have not all succeeded, whatever a writer behind its back did", async () => {
    const { store, room, fence } = await setup();
    await store.setRoomCap(room, 1, { fence });
    const run = await create(
      store,
      fence,
      dag(ctx.uid("guard"), [task("a"), task("z"), task("b", { needs: ["a"] })]),
    );
    expect(await store.scheduleStep(fence)).toEqual({ queued: 1, skipped: 0 });
    const w = session("w");
    const first = await store.claimTask(offer(w, [room]));
    expect(first?.task.taskId).toBe("a");
    await store.finishTask(first!.token, ok);
    // The step after a's end queues z (cap 1); b is ready in the leader's view.
    expect(await store.scheduleStep(fence, true)).toEqual({ queued: 1, skipped: 0 });
    expect(await statuses(store, run)).toEqual({ a: "succeeded", z: "queued", b: "blocked" });
    // Behind every store call's back, a is no longer succeeded.
    await ctx.capabilities.setTaskStatus(run.runId, "a", "failed");
    const second = await store.claimTask(offer(w, [room]));
    await store.finishTask(second!.token, ok);
    // b's need is not met: no step queues it (the write itself checks the needs); a view that
    // thought b ready reads the whole room at the next step, which skips b.
    const steps = [await store.scheduleStep(fence, true), await store.scheduleStep(fence, true)];
    expect(steps.map((r) => r.queued)).toEqual([0, 0]);
    expect(steps.reduce((n, r) => n + r.skipped, 0)).toBe(1);
    expect((await store.getTask(run.runId, "b"))?.status).toBe("skipped");
  });

  it("reap: an expired lease with attempts left → queued after the backoff; without → failed; the stale executor is fenced out", async () => {
    const { store, room, fence } = await setup();
    const run = await create(
      store,
      fence,
      dag(ctx.uid("lease"), [task("t", { retries: 1, retryBackoffMs: 1000 })]),
    );
    await store.scheduleStep(fence);
    const w = session("w");
    const first = await store.claimTask(offer(w, [room], { leaseMs: 5000 }));
    ctx.clock.advance(4999);
    expect((await store.reap(fence)).requeued).toBe(0);
    ctx.clock.advance(1);
    expect(await store.reap(fence)).toEqual({
      requeued: 1,
      failed: 0,
      timedOut: 0,
      canceled: 0,
      expiredRuns: 0,
      open: true,
    });
    // Its node was lost: run again at once, without spending its retry (claims.ts has the bound).
    const t = await store.getTask(run.runId, "t");
    expect(t).toMatchObject({
      status: "queued",
      attempt: 2,
      maxAttempts: 3,
      executor: null,
      notBefore: ctx.clock.now(),
    });
    await expect(store.finishTask(first!.token, ok)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.renewTaskLease(first!.token, 5000)).rejects.toBeInstanceOf(ConflictError);
    const second = await store.claimTask(offer(w, [room], { leaseMs: 5000 }));
    expect(second?.task.attempt).toBe(2);
    await expect(store.finishTask(first!.token, ok)).rejects.toBeInstanceOf(ConflictError);
    expect(await store.finishTask(second!.token, ok)).toEqual({ status: "succeeded" });
  });

  it("reap: a running task past its deadline times out (or retries), even while its lease is renewed", async () => {
    const { store, room, fence } = await setup();
    const run = await create(
      store,
      fence,
      dag(ctx.uid("deadline"), [
        task("once", { timeoutMs: 2000 }),
        task("twice", { timeoutMs: 2000, retries: 1 }),
      ]),
    );
    await store.scheduleStep(fence);
    const w = session("w");
    const a = await store.claimTask(offer(w, [room], { leaseMs: 60_000 }));
    const b = await store.claimTask(offer(w, [room], { leaseMs: 60_000 }));
    expect(a?.task.deadline).toBe(ctx.clock.now() + 2000);
    ctx.clock.advance(1999);
    await store.renewTaskLease(a!.token, 60_000);
    expect((await store.reap(fence)).timedOut).toBe(0);
    ctx.clock.advance(1);
    expect(await store.reap(fence)).toEqual({
      requeued: 1,
      failed: 0,
      timedOut: 1,
      canceled: 0,
      expiredRuns: 0,
      open: true,
    });
    expect(await statuses(store, run)).toEqual({ once: "timed_out", twice: "queued" });
    expect(b).not.toBeNull();
  });

  it("reap: a task queued longer than its queue timeout times out, and its dependents are skipped", async () => {
    const { store, fence } = await setup();
    const run = await create(
      store,
      fence,
      dag(ctx.uid("qt"), [
        task("stuck", { queueTimeoutMs: 1000, on: { labels: ["gpu"], node: null } }),
        task("next", { needs: ["stuck"] }),
      ]),
    );
    await store.scheduleStep(fence);
    ctx.clock.advance(999);
    expect((await store.reap(fence)).timedOut).toBe(0);
    ctx.clock.advance(1);
    expect((await store.reap(fence)).timedOut).toBe(1);
    expect((await store.getTask(run.runId, "stuck"))?.status).toBe("timed_out");
    expect(await store.scheduleStep(fence)).toEqual({ queued: 0, skipped: 1 });
    expect(await store.deriveRunOutcomes(fence)).toEqual([
      { runId: run.runId, dagId: run.dagId, from: "running", to: "failed" },
    ]);
  });

  it("reap: a canceling task whose executor stopped renewing → canceled; the run then ends canceled", async () => {
    const { store, room, fence } = await setup();
    const run = await create(store, fence, dag(ctx.uid("cx"), [task("t")]));
    await store.scheduleStep(fence);
    const claimed = await store.claimTask(offer(session("w"), [room], { leaseMs: 5000 }));
    expect((await store.cancelRun(cmd(fence), room, run.dagId, "@bob:example.org")).run.status).toBe(
      "canceling",
    );
    expect(await store.deriveRunOutcomes(fence)).toEqual([]);
    ctx.clock.advance(5000);
    expect(await store.reap(fence)).toEqual({
      requeued: 0,
      failed: 0,
      timedOut: 0,
      canceled: 1,
      expiredRuns: 0,
      open: true,
    });
    expect((await store.getTask(run.runId, "t"))?.status).toBe("canceled");
    await expect(store.finishTask(claimed!.token, { ...ok, outcome: "canceled" })).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect(await store.deriveRunOutcomes(fence)).toEqual([
      { runId: run.runId, dagId: run.dagId, from: "canceling", to: "canceled" },
    ]);
  });

  it("reap: a pending run past its confirmation window → expired, its tasks canceled; confirm then refuses", async () => {
    const { store, room, fence } = await setup();
    const created = await store.createRun(
      cmd(fence),
      runInput(room, dag(ctx.uid("late"), [task("a"), task("b")]), {
        needsConfirmation: true,
        confirmTimeoutMs: 5000,
      }),
    );
    const run = created.kind === "created" ? created.run : undefined;
    expect(run?.confirmDeadline).toBe(ctx.clock.now() + 5000);
    ctx.clock.advance(4999);
    expect((await store.reap(fence)).expiredRuns).toBe(0);
    ctx.clock.advance(1);
    expect(await store.reap(fence)).toEqual({
      requeued: 0,
      failed: 0,
      timedOut: 0,
      canceled: 0,
      expiredRuns: 1,
      open: true,
    });
    expect((await store.getRunById(run!.runId))?.status).toBe("expired");
    expect(await statuses(store, run!)).toEqual({ a: "canceled", b: "canceled" });
    expect((await store.confirmRun(cmd(fence), room, run!.dagId, "@bob:example.org")).kind).toBe(
      "wrong-status",
    );
    expect((await store.reap(fence)).expiredRuns).toBe(0);
  });

  it("reap says whether the room holds anything that could expire (open), as seen before it moves anything", async () => {
    const { store, room, fence } = await setup();
    expect((await store.reap(fence)).open).toBe(false);
    const pending = await store.createRun(
      cmd(fence),
      runInput(room, dag(ctx.uid("wait"), [task("a")]), { needsConfirmation: true, confirmTimeoutMs: 5000 }),
    );
    expect(pending.kind).toBe("created");
    expect((await store.reap(fence)).open).toBe(true);
    ctx.clock.advance(5000);
    // The run it expires was pending when it looked.
    expect(await store.reap(fence)).toMatchObject({ expiredRuns: 1, open: true });
    expect((await store.reap(fence)).open).toBe(false);
    const run = await create(store, fence, dag(ctx.uid("open"), [task("b"), task("c", { needs: ["b"] })]));
    // Blocked tasks cannot expire; queued, running and canceling ones can.
    expect((await store.reap(fence)).open).toBe(false);
    await store.scheduleStep(fence);
    expect((await store.reap(fence)).open).toBe(true);
    const b = await store.claimTask(offer(session("w"), [room]));
    expect((await store.reap(fence)).open).toBe(true);
    await store.finishTask(b!.token, ok);
    expect((await store.reap(fence)).open).toBe(false);
    await store.scheduleStep(fence);
    const c = await store.claimTask(offer(session("w"), [room]));
    await store.finishTask(c!.token, ok);
    expect(await store.deriveRunOutcomes(fence)).toEqual([
      { runId: run.runId, dagId: run.dagId, from: "running", to: "succeeded" },
    ]);
    expect((await store.reap(fence)).open).toBe(false);
  });

  it("reap with nothing due changes nothing and logs nothing", async () => {
    const { store, room, fence } = await setup();
    await create(store, fence, dag(ctx.uid("idle"), [task("a")]));
    await store.scheduleStep(fence);
    await store.claimTask(offer(session("w"), [room]));
    const before = await store.readEvents(room, 0);
    expect(await store.reap(fence)).toEqual({
      requeued: 0,
      failed: 0,
      timedOut: 0,
      canceled: 0,
      expiredRuns: 0,
      open: true,
    });
    expect(await store.readEvents(room, 0)).toEqual(before);
  });

  it("derives outcomes: all succeeded → succeeded, any other ending → failed, unfinished runs untouched, once", async () => {
    const { store, room, fence } = await setup();
    const good = await create(store, fence, dag(ctx.uid("good"), [task("a"), task("b", { needs: ["a"] })]));
    const bad = await create(store, fence, dag(ctx.uid("bad"), [task("x"), task("y", { needs: ["x"] })]));
    const open = await create(
      store,
      fence,
      dag(ctx.uid("open"), [task("o", { on: { labels: ["gpu"], node: null } })]),
    );
    const w = session("w");
    const drain = async (): Promise<void> => {
      await store.scheduleStep(fence);
      for (
        let c = await store.claimTask(offer(w, [room]));
        c !== null;
        c = await store.claimTask(offer(w, [room]))
      )
        await store.finishTask(c.token, c.task.taskId === "x" ? failed : ok);
    };
    await drain();
    expect(await store.deriveRunOutcomes(fence)).toEqual([]);
    await drain();
    await store.scheduleStep(fence);
    const outcomes = await store.deriveRunOutcomes(fence);
    expect(outcomes).toHaveLength(2);
    expect(outcomes).toEqual(
      expect.arrayContaining([
        { runId: good.runId, dagId: good.dagId, from: "running", to: "succeeded" },
        { runId: bad.runId, dagId: bad.dagId, from: "running", to: "failed" },
      ]),
    );
    expect((await store.getRunById(good.runId))?.status).toBe("succeeded");
    expect((await store.getRunById(bad.runId))?.status).toBe("failed");
    expect((await store.getRunById(open.runId))?.status).toBe("running");
    expect(await store.deriveRunOutcomes(fence)).toEqual([]);
  });

  it("a deposed leader's schedule, reap and derive change nothing", async () => {
    const { store, room, fence } = await setup();
    const run = await create(store, fence, dag(ctx.uid("dep"), [task("a")]));
    ctx.clock.advance(LONG_LEASE);
    const next = await becomeLeader(store, room, "next");
    await expect(store.scheduleStep(fence)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.reap(fence)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.deriveRunOutcomes(fence)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.setRoomCap(room, 3, { fence: fence })).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getRoomCap(room)).toBe(16);
    expect((await store.getTask(run.runId, "a"))?.status).toBe("blocked");
    expect(await store.scheduleStep(next)).toEqual({ queued: 1, skipped: 0 });
  });
}
