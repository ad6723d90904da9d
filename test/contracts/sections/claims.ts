/**
 * Store contract: the worker's side. Claims in priority then FIFO order that fit the node (room,
 * labels, pinned node, action, not_before), exactly one winner per task among racing connections,
 * lease renewal and completion fenced by (task, claim version, session), retries with exponential
 * backoff, and stale executors (reclaimed after expiry, or restarted under the same node id) that
 * can no longer renew, write output, complete or fail the task.
 */
import { expect, it } from "vitest";
import { MAX_TASK_RETRY_BACKOFF_MS, taskRetryWaitMs } from "../../../src/domain/backoff.js";
import { MAX_LOST_RERUNS } from "../../../src/domain/task-states.js";
import { ConflictError, NotFoundError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store, TaskResult, TaskToken } from "../../../src/ports/store.js";
import {
  becomeLeader,
  dag,
  failed,
  ok,
  offer,
  publishRunning,
  race,
  session,
  task,
} from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 16;
const LEASE = 30_000;

export function claimsSection(ctx: ContractContext): void {
  const setup = async (): Promise<{ store: Store; room: string; fence: LeaderFence }> => {
    const store = await ctx.store();
    const room = ctx.uid("!claims");
    return { store, room, fence: await becomeLeader(store, room) };
  };

  /** Stretch the leader's lease so it outlives the clock jump that expires a task lease. */
  const lead = async (store: Store, fence: LeaderFence): Promise<void> => {
    await store.renewLease(fence, 10 * 60_000);
  };

  it("claims the highest priority first, then first in first out across runs; null when the queue is empty", async () => {
    const { store, room, fence } = await setup();
    await publishRunning(store, fence, dag(ctx.uid("r1"), [task("low1"), task("high1", { priority: 5 })]));
    await publishRunning(
      store,
      fence,
      dag(ctx.uid("r2"), [task("low2"), task("high2", { priority: 5 }), task("neg", { priority: -1 })]),
    );
    const w = session("w");
    const order: string[] = [];
    for (
      let c = await store.claimTask(offer(w, [room]));
      c !== null;
      c = await store.claimTask(offer(w, [room]))
    )
      order.push(c.task.taskId);
    expect(order).toEqual(["high1", "high2", "low1", "low2", "neg"]);
  });

  it("a claim moves queued → running with the executor, lease, deadline and a fencing token", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a", { timeoutMs: 60_000 })]));
    const before = await store.getTask(run.runId, "a");
    expect(before).toMatchObject({ status: "queued", queuedAt: ctx.clock.now() });
    const w = session("w");
    const claimed = await store.claimTask(offer(w, [room], { leaseMs: LEASE }));
    const now = ctx.clock.now();
    expect(claimed?.token).toEqual({
      runId: run.runId,
      taskId: "a",
      version: before!.version + 1,
      session: w,
      // What the domain decides a failed finish's retry from (finishAnswers), as the claim found it.
      claim: { attempt: 1, retryBackoffMs: 1000 },
    });
    expect(claimed?.task).toMatchObject({
      status: "running",
      version: before!.version + 1,
      attempt: 1,
      executor: w,
      leaseExpiresAt: now + LEASE,
      deadline: now + 60_000,
      startedAt: now,
    });
    expect(await store.getTask(run.runId, "a")).toEqual(claimed?.task);
    expect(await store.claimTask(offer(w, [room]))).toBeNull();
  });

  it("claims only what fits: room, labels ⊆ node labels, pinned node, configured action", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [
        task("gpu", { on: { labels: ["gpu", "linux"], node: null } }),
        task("pinned", { on: { labels: [], node: "n9" } }),
        task("deploy", { action: "deploy" }),
      ]),
    );
    const n1 = session("n1");
    expect(
      await store.claimTask(
        offer(n1, [ctx.uid("!elsewhere")], { labels: ["gpu", "linux"], actions: ["echo", "deploy"] }),
      ),
    ).toBeNull();
    expect(await store.claimTask(offer(n1, [room], { labels: ["linux"] }))).toBeNull();
    const gpu = await store.claimTask(offer(n1, [room], { labels: ["linux", "gpu", "big"] }));
    expect(gpu?.task.taskId).toBe("gpu");
    expect(await store.claimTask(offer(n1, [room], { labels: ["linux", "gpu"] }))).toBeNull();
    const pinned = await store.claimTask(offer(session("n9"), [room]));
    expect(pinned?.task.taskId).toBe("pinned");
    const deploy = await store.claimTask(offer(n1, [room], { actions: ["deploy"] }));
    expect(deploy?.task.taskId).toBe("deploy");
    expect((await store.listTasks(run.runId)).every((t) => t.status === "running")).toBe(true);
  });

  it(`${RACERS} connections racing for one queued task: exactly one winner, the rest get null`, async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("only")]));
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.claimTask(offer(session(`w${i}`), [room]))),
    );
    expect(errors).toEqual([]);
    const winners = values.filter((v) => v !== null);
    expect(winners).toHaveLength(1);
    expect((await store.getTask(run.runId, "only"))?.executor).toEqual(winners[0]!.token.session);
  });

  it(`${RACERS} connections racing for 5 queued tasks: each task claimed exactly once`, async () => {
    const { store, room, fence } = await setup();
    await publishRunning(
      store,
      fence,
      dag(
        ctx.uid("d"),
        ["a", "b", "c", "d", "e"].map((id) => task(id)),
      ),
    );
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.claimTask(offer(session(`w${i}`), [room]))),
    );
    expect(errors).toEqual([]);
    const ids = values.filter((v) => v !== null).map((v) => v.task.taskId);
    expect(ids.sort()).toEqual(["a", "b", "c", "d", "e"]);
  });

  it("renews the lease without changing the version; wrong version, session or task are refused", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a")]));
    const c = (await store.claimTask(offer(session("w"), [room])))!;
    ctx.clock.advance(1000);
    const renewed = await store.renewTaskLease(c.token, LEASE);
    expect(renewed).toEqual({ leaseExpiresAt: ctx.clock.now() + LEASE, status: "running" });
    const t = await store.getTask(run.runId, "a");
    expect(t).toMatchObject({ version: c.token.version, leaseExpiresAt: renewed.leaseExpiresAt });
    await expect(
      store.renewTaskLease({ ...c.token, version: c.token.version - 1 }, LEASE),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(store.renewTaskLease({ ...c.token, session: session("w") }, LEASE)).rejects.toBeInstanceOf(
      ConflictError,
    );
    await expect(store.renewTaskLease({ ...c.token, taskId: "zzz" }, LEASE)).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect((await store.getTask(run.runId, "a"))?.leaseExpiresAt).toBe(renewed.leaseExpiresAt);
  });

  it("finishes once: succeeded with exit code and output; a second finish is a conflict; unknown task not found", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a", { retries: 3 })]));
    const c = (await store.claimTask(offer(session("w"), [room])))!;
    expect(await store.finishTask(c.token, ok)).toEqual({ status: "succeeded" });
    const t = await store.getTask(run.runId, "a");
    expect(t).toMatchObject({
      status: "succeeded",
      exitCode: 0,
      output: "done\n",
      error: null,
      finishedAt: ctx.clock.now(),
    });
    await expect(store.finishTask(c.token, failed)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.renewTaskLease(c.token, LEASE)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.finishTask({ ...c.token, runId: "nope" }, ok)).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.getTask(run.runId, "a")).toEqual(t);
  });

  it("a 'canceled' outcome for a task nobody canceled is refused and changes nothing", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a")]));
    const c = (await store.claimTask(offer(session("w"), [room])))!;
    const bogus = store.finishTask(c.token, { outcome: "canceled", exitCode: null, output: "", error: null });
    await expect(bogus).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getTask(run.runId, "a"))?.status).toBe("running");
  });

  it("an outcome a worker cannot report (running, queued, anything else) is bad input and changes nothing", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a")]));
    const c = (await store.claimTask(offer(session("w"), [room])))!;
    const before = await store.getTask(run.runId, "a");
    for (const outcome of ["running", "queued", "canceling", "bogus"]) {
      const bad = { ...ok, outcome } as unknown as TaskResult;
      await expect(store.finishTask(c.token, bad)).rejects.toThrow(RangeError);
    }
    expect(await store.getTask(run.runId, "a")).toEqual(before);
    expect(await store.finishTask(c.token, ok)).toEqual({ status: "succeeded" });
  });

  it("retries a failed or timed-out attempt with exponential backoff, then records the final outcome", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { retries: 2, retryBackoffMs: 1000 })]),
    );
    const w = session("w");
    const first = (await store.claimTask(offer(w, [room])))!;
    expect(await store.finishTask(first.token, failed)).toEqual({ status: "queued" });
    let t = (await store.getTask(run.runId, "a"))!;
    expect(t).toMatchObject({
      status: "queued",
      attempt: 2,
      executor: null,
      notBefore: ctx.clock.now() + 1000,
      error: "exit 1",
    });
    ctx.clock.advance(999);
    expect(await store.claimTask(offer(w, [room]))).toBeNull();
    ctx.clock.advance(1);
    const second = (await store.claimTask(offer(w, [room])))!;
    expect(second.task.attempt).toBe(2);
    const timedOut = { outcome: "timed_out" as const, exitCode: null, output: "", error: "deadline" };
    expect(await store.finishTask(second.token, timedOut)).toEqual({ status: "queued" });
    t = (await store.getTask(run.runId, "a"))!;
    expect(t.notBefore).toBe(ctx.clock.now() + 2000);
    ctx.clock.advance(2000);
    const third = (await store.claimTask(offer(w, [room])))!;
    expect(third.task.attempt).toBe(3);
    expect(await store.finishTask(third.token, timedOut)).toEqual({ status: "timed_out" });
    expect((await store.getTask(run.runId, "a"))?.status).toBe("timed_out");
    // Every claim produced a new token; the old ones are dead.
    await expect(store.finishTask(first.token, ok)).rejects.toBeInstanceOf(ConflictError);
  });

  it("waits before a retry exactly what the domain's taskRetryWaitMs says, up to its cap", async () => {
    const { store, room, fence } = await setup();
    // A base above half the cap: the second wait is the cap, not the doubled base.
    const base = 0.6 * MAX_TASK_RETRY_BACKOFF_MS;
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { retries: 2, retryBackoffMs: base })]),
    );
    const w = session("w");
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 2; attempt += 1) {
      const claimed = (await store.claimTask(offer(w, [room], { leaseMs: 3 * MAX_TASK_RETRY_BACKOFF_MS })))!;
      expect(claimed.task.attempt).toBe(attempt);
      expect(await store.finishTask(claimed.token, failed)).toEqual({ status: "queued" });
      const t = (await store.getTask(run.runId, "a"))!;
      waits.push(t.notBefore! - ctx.clock.now());
      ctx.clock.advance(waits[waits.length - 1]!);
    }
    expect(waits).toEqual([taskRetryWaitMs(base, 1), taskRetryWaitMs(base, 2)]);
    expect(waits).toEqual([base, MAX_TASK_RETRY_BACKOFF_MS]);
  });

  it("a stale executor reclaimed after its lease expired cannot renew, complete or fail the task", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { retries: 1, retryBackoffMs: 10 })]),
    );
    const stale = (await store.claimTask(offer(session("w1"), [room], { leaseMs: LEASE })))!;
    await lead(store, fence);
    ctx.clock.advance(LEASE);
    expect(await store.reap(fence)).toMatchObject({ requeued: 1 });
    ctx.clock.advance(10);
    const fresh = (await store.claimTask(offer(session("w2"), [room])))!;
    expect(fresh.token.version).toBeGreaterThan(stale.token.version);
    const snapshot = await store.getTask(run.runId, "a");
    await expectStale(store, stale.token);
    expect(await store.getTask(run.runId, "a")).toEqual(snapshot);
    expect(await store.finishTask(fresh.token, ok)).toEqual({ status: "succeeded" });
  });

  it("writes a running task's output so far, fenced by the claim; a stale claim's write is refused; a new claim starts empty", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { retries: 1, retryBackoffMs: 10 })]),
    );
    const first = (await store.claimTask(offer(session("w1"), [room], { leaseMs: LEASE })))!;
    expect(first.task).toMatchObject({ output: null, outputBytes: null });
    const version = (await store.getTask(run.runId, "a"))!.version;
    await store.writeTaskOutput(first.token, "line 1\n", 7);
    // A tail of a longer output: the bytes written in all are what a reader needs to continue.
    await store.writeTaskOutput(first.token, "line 2\nline 3\n", 1_000_007);
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "running",
      version,
      output: "line 2\nline 3\n",
      outputBytes: 1_000_007,
    });
    // The attempt fails and is retried: its output stays while the task waits, the next claim clears it.
    expect(
      await store.finishTask(first.token, { ...failed, output: "last\n", outputBytes: 1_000_012 }),
    ).toEqual({
      status: "queued",
    });
    expect(await store.getTask(run.runId, "a")).toMatchObject({ output: "last\n", outputBytes: 1_000_012 });
    ctx.clock.advance(10);
    const second = (await store.claimTask(offer(session("w2"), [room], { leaseMs: LEASE })))!;
    expect(second.task).toMatchObject({ attempt: 2, output: null, outputBytes: null });
    await store.writeTaskOutput(second.token, "fresh\n", 6);
    // The first attempt's executor is stale: its write is refused and changes nothing.
    await expect(store.writeTaskOutput(first.token, "stale\n", 9_999)).rejects.toBeInstanceOf(ConflictError);
    await expect(store.writeTaskOutput({ ...second.token, taskId: "zzz" }, "x", 1)).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect(await store.getTask(run.runId, "a")).toMatchObject({ output: "fresh\n", outputBytes: 6 });
    // A finish without a byte count records the output's own size.
    await store.finishTask(second.token, { ...ok, output: "héllo\n" });
    expect(await store.getTask(run.runId, "a")).toMatchObject({ output: "héllo\n", outputBytes: 7 });
    await expect(store.writeTaskOutput(second.token, "late\n", 5)).rejects.toBeInstanceOf(ConflictError);
    expect((await store.getTask(run.runId, "a"))?.output).toBe("héllo\n");
  });

  it("a run's list carries each task's last 4,096 characters of output; getTask the whole", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a"), task("b")]));
    const a = (await store.claimTask(offer(session("w1"), [room], { leaseMs: LEASE })))!;
    // 10,000 characters, two of them outside the Basic Multilingual Plane, ending with the line shown.
    const whole = `${"é".repeat(6_000)}\n${"x".repeat(3_900)}🙂\nboom: disk full 🙂\n`;
    await store.finishTask(a.token, { ...failed, output: whole });
    const b = (await store.claimTask(offer(session("w1"), [room], { leaseMs: LEASE })))!;
    await store.finishTask(b.token, { ...ok, output: "short\n" });
    const listed = new Map((await store.listTasks(run.runId)).map((t) => [t.taskId, t]));
    const tail = listed.get("a")!.output!;
    expect([...tail].length).toBe(4_096);
    expect(whole.endsWith(tail)).toBe(true);
    expect(tail.endsWith("boom: disk full 🙂\n")).toBe(true);
    expect(listed.get("b")!.output).toBe("short\n");
    expect((await store.getTask(run.runId, "a"))!.output).toBe(whole);
  });

  it("a stale executor whose task the reaper failed (no attempts left) cannot overwrite the outcome", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a", { rerunIfLost: false })]));
    const stale = (await store.claimTask(offer(session("w1"), [room], { leaseMs: LEASE })))!;
    await lead(store, fence);
    ctx.clock.advance(LEASE + 1);
    expect(await store.reap(fence)).toMatchObject({ failed: 1, requeued: 0 });
    const snapshot = await store.getTask(run.runId, "a");
    expect(snapshot?.status).toBe("failed");
    await expectStale(store, stale.token);
    expect(await store.getTask(run.runId, "a")).toEqual(snapshot);
  });

  it("a lost node's attempt runs again elsewhere without spending the task's retries, MAX_LOST_RERUNS times, then as a retry", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a", { retries: 1, retryBackoffMs: 10 })]),
    );
    await lead(store, fence);
    const loseOn = async (node: string): Promise<void> => {
      (await store.claimTask(offer(session(node), [room], { leaseMs: LEASE })))!;
      ctx.clock.advance(LEASE);
      expect(await store.reap(fence)).toMatchObject({ requeued: 1, failed: 0 });
    };
    await loseOn("n1");
    // Run again at once, its one retry still there: attempt 2 of 3.
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "queued",
      attempt: 2,
      maxAttempts: 3,
      error: "node n1 was lost; running again",
    });
    await loseOn("n2");
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      attempt: 3,
      maxAttempts: 4,
      error: "node n2 was lost (the 2nd lost attempt of this task); running again",
    });
    expect(MAX_LOST_RERUNS).toBe(2);
    // Bounded: the third lost attempt spends the retry (after its backoff), the fourth ends the task.
    await loseOn("n3");
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "queued",
      attempt: 4,
      maxAttempts: 4,
      error: "node n3 was lost (the 3rd lost attempt of this task); running again as one of its retries",
    });
    ctx.clock.advance(taskRetryWaitMs(10, 3));
    (await store.claimTask(offer(session("n4"), [room], { leaseMs: LEASE })))!;
    ctx.clock.advance(LEASE);
    expect(await store.reap(fence)).toMatchObject({ requeued: 0, failed: 1 });
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "failed",
      attempt: 4,
      error: "node n4 was lost (the 4th lost attempt of this task); not run again",
    });
    // The log says which requeues spent no retry.
    const requeues = (await store.readEvents(room, 0, 1000)).filter(
      (e) => e.kind === "task.queued" && e.data["lostNode"] === true,
    );
    expect(requeues.map((e) => e.data["retrySpent"])).toEqual([false, false, true]);
  });

  it("a task declared rerun_if_lost = false whose node was lost fails, retries left or not, saying why", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("once", { retries: 2, rerunIfLost: false }), task("other")]),
    );
    await lead(store, fence);
    const claimed = (await store.claimTask(offer(session("n1"), [room], { leaseMs: LEASE })))!;
    expect(claimed.task.taskId).toBe("once");
    ctx.clock.advance(LEASE - 1);
    // Not before the lease expired by the store's clock.
    const early = await store.reap(fence);
    expect(early.failed + early.requeued).toBe(0);
    ctx.clock.advance(1);
    expect(await store.reap(fence)).toMatchObject({ requeued: 0, failed: 1 });
    expect(await store.getTask(run.runId, "once")).toMatchObject({
      status: "failed",
      attempt: 1,
      maxAttempts: 3,
      error: "node n1 was lost; not run again: rerun_if_lost = false",
    });
    // The other task, declared nothing, is stored with the default.
    expect((await store.getTask(run.runId, "other"))?.status).toBe("queued");
  });

  it("a worker releases an attempt it stopped for an unreachable store: run again at once with its words, fenced", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(
      store,
      fence,
      dag(ctx.uid("d"), [task("a"), task("once", { rerunIfLost: false, priority: -1 })]),
    );
    const first = (await store.claimTask(offer(session("n1"), [room], { leaseMs: LEASE })))!;
    expect(first.task.taskId).toBe("a");
    const why = "the store was unreachable for 46s";
    // Before its lease expired: the worker knows its action has ended.
    expect(await store.releaseTask(first.token, why)).toEqual({ status: "queued" });
    expect(await store.getTask(run.runId, "a")).toMatchObject({
      status: "queued",
      attempt: 2,
      maxAttempts: 2,
      executor: null,
      error: "node n1 stopped its action: the store was unreachable for 46s; running again",
    });
    // Fenced: the released token holds nothing any more, a second release changes nothing.
    const snapshot = await store.getTask(run.runId, "a");
    await expect(store.releaseTask(first.token, why)).rejects.toBeInstanceOf(ConflictError);
    await expectStale(store, first.token);
    expect(await store.getTask(run.runId, "a")).toEqual(snapshot);
    const second = (await store.claimTask(offer(session("n2"), [room], { leaseMs: LEASE })))!;
    expect(second.task).toMatchObject({ taskId: "a", attempt: 2 });
    expect(await store.finishTask(second.token, ok)).toEqual({ status: "succeeded" });
    // Never twice: a rerun_if_lost = false task fails with the same words.
    const once = (await store.claimTask(offer(session("n1"), [room], { leaseMs: LEASE })))!;
    expect(once.task.taskId).toBe("once");
    expect(await store.releaseTask(once.token, why)).toEqual({ status: "failed" });
    expect(await store.getTask(run.runId, "once")).toMatchObject({
      status: "failed",
      error:
        "node n1 stopped its action: the store was unreachable for 46s; not run again: rerun_if_lost = false",
    });
  });

  it("a node restarted under the same node id (new boot id) cannot renew, complete or fail its old task", async () => {
    const { store, room, fence } = await setup();
    const run = await publishRunning(store, fence, dag(ctx.uid("d"), [task("a"), task("b")]));
    const oldLife = session("n1", "boot-1");
    const c = (await store.claimTask(offer(oldLife, [room])))!;
    const newLife = session("n1", "boot-2");
    const snapshot = await store.getTask(run.runId, c.task.taskId);
    await expectStale(store, { ...c.token, session: newLife });
    expect(await store.getTask(run.runId, c.task.taskId)).toEqual(snapshot);
    // The new life claims fresh work normally.
    expect((await store.claimTask(offer(newLife, [room])))?.task.taskId).toBe("b");
  });
}

async function expectStale(store: Store, token: TaskToken): Promise<void> {
  await expect(store.renewTaskLease(token, LEASE)).rejects.toBeInstanceOf(ConflictError);
  await expect(store.writeTaskOutput(token, "stale\n", 6)).rejects.toBeInstanceOf(ConflictError);
  await expect(store.finishTask(token, ok)).rejects.toBeInstanceOf(ConflictError);
  await expect(store.finishTask(token, failed)).rejects.toBeInstanceOf(ConflictError);
  await expect(
    store.finishTask(token, { outcome: "timed_out", exitCode: null, output: "", error: "deadline" }),
  ).rejects.toBeInstanceOf(ConflictError);
}
