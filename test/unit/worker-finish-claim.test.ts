// A finishing task hands its slot straight to the next ready task in the commit of its finish
// (finishAndClaim) while the worker's last claim, answered recently, left fitting tasks
// behind; never while stopping, never past capacity, and a refused or failed transaction claims
// nothing. Fake clock, in-memory claimer, no store, no processes.
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { Worker } from "../../src/app/worker.js";
import { ConflictError, StoreError } from "../../src/ports/errors.js";
import type { ActionDefinition, ExecRequest, ExecResult, Executor } from "../../src/ports/executor.js";
import { FakeClock, settle } from "../support/fake-clock.js";
import { FakeTaskClaimer, taskRecord } from "../support/fake-task-claimer.js";

const action: ActionDefinition = {
  name: "work",
  argv: ["/bin/true"],
  args: {},
  cwd: null,
  env: {},
  timeoutMs: 60_000,
  outputLimitBytes: 1024,
  killGraceMs: 0,
};

function result(outcome: ExecResult["outcome"]): ExecResult {
  return {
    outcome,
    exitCode: outcome === "succeeded" ? 0 : null,
    signal: null,
    output: "",
    outputTruncated: false,
    totalOutputBytes: 0,
    durationMs: 0,
  };
}

/** An executor whose actions run until the test ends the oldest one. */
class HeldExecutor implements Executor {
  private readonly held: Array<(r: ExecResult) => void> = [];

  run(request: ExecRequest): Promise<ExecResult> {
    return new Promise<ExecResult>((resolve) => {
      this.held.push(resolve);
      request.signal?.addEventListener("abort", () => resolve(result("killed")), { once: true });
    });
  }

  succeedOldest(): void {
    this.held.shift()?.(result("succeeded"));
  }
}

/** An executor whose actions each take their own time on the FakeClock; counts how many run at once. */
class TimedExecutor implements Executor {
  active = 0;
  maxActive = 0;
  private started = 0;

  constructor(
    private readonly clock: FakeClock,
    private readonly onStart: () => void,
  ) {}

  async run(request: ExecRequest): Promise<ExecResult> {
    this.active += 1;
    this.maxActive = Math.max(this.maxActive, this.active);
    this.onStart();
    // 1 to 11 ms, in an order that mixes short and long ones.
    const ms = 1 + ((this.started++ * 7) % 11);
    try {
      await this.clock.sleep(ms, request.signal);
      return result(request.signal?.aborted === true ? "killed" : "succeeded");
    } finally {
      this.active -= 1;
    }
  }
}

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ abortRunning: true })));
});

function newWorker(
  clock: FakeClock,
  store: FakeTaskClaimer,
  executor: Executor,
  options: { capacity: number; pollMs?: number },
): Worker {
  const worker = new Worker(
    {
      session: { nodeId: "n1", bootId: "b1" },
      roomIds: ["!room:test"],
      labels: [],
      capacity: options.capacity,
      actions: new Map([[action.name, action]]),
      taskLeaseMs: 10_000,
      pollMs: options.pollMs ?? 60_000,
      debounceMs: 0,
    },
    { store, executor, clock, logger: silentLogger() },
  );
  workers.push(worker);
  return worker;
}

/** A capacity-1 worker running "a" of a, b, c: its first claim left more. */
async function busyWorker(): Promise<{
  clock: FakeClock;
  store: FakeTaskClaimer;
  worker: Worker;
  executor: HeldExecutor;
}> {
  const clock = new FakeClock(1_000);
  const store = new FakeTaskClaimer(clock);
  const executor = new HeldExecutor();
  for (const id of ["a", "b", "c"]) store.add(taskRecord("run-1", id, action.name));
  const worker = newWorker(clock, store, executor, { capacity: 1 });
  worker.start();
  await settle();
  expect(worker.claims).toMatchObject({ statements: 1, tasks: 1 });
  return { clock, store, worker, executor };
}

/** The claim and finish calls the store saw, in order. */
function claimOps(store: FakeTaskClaimer): string[] {
  return store.calls
    .map((c) => c.op)
    .filter((op) => op === "claims" || op === "claim-after-finish" || op === "finish");
}

async function succeed(executor: HeldExecutor, clock: FakeClock): Promise<void> {
  executor.succeedOldest();
  await clock.advance(0);
  await settle(20);
}

describe("Worker: a finish hands its slot to the next task in the same commit", () => {
  it("a handover that says more while other slots are free fills them at once (the leader leaves a self-serving node alone)", async () => {
    const clock = new FakeClock(1_000);
    const store = new FakeTaskClaimer(clock);
    const executor = new HeldExecutor();
    for (const id of ["a", "b", "c", "d", "e"]) store.add(taskRecord("run-1", id, action.name));
    // The first claim takes one task of three free slots and says more (a claim cut short).
    store.claimLimit = 1;
    const worker = newWorker(clock, store, executor, { capacity: 3 });
    worker.start();
    await settle();
    expect(worker.runningCount).toBe(1);
    store.claimLimit = Number.POSITIVE_INFINITY;
    await succeed(executor, clock); // a: its finish claims b and says more; two slots are free
    expect(claimOps(store)).toEqual(["claims", "claim-after-finish", "claims"]);
    expect(worker.runningCount).toBe(3);
    expect(worker.claims.byCause).toMatchObject({ finish: { tasks: 1 }, self: { tasks: 2 } });
  });

  it("refills the slot through finishAndClaim while ready tasks are left, with no claim of its own", async () => {
    const { clock, store, worker, executor } = await busyWorker();
    await succeed(executor, clock); // a: its finish claims b, more left (c)
    await succeed(executor, clock); // b: its finish claims c, nothing left
    await succeed(executor, clock); // c: nothing was left, a plain finish
    expect(claimOps(store)).toEqual(["claims", "claim-after-finish", "claim-after-finish", "finish"]);
    expect(store.finishedTasks).toEqual(["run-1/a", "run-1/b", "run-1/c"]);
    expect(worker.claims.byCause).toEqual({
      start: { statements: 1, empty: 0, tasks: 1 },
      finish: { statements: 2, empty: 0, tasks: 2 },
    });
    expect(worker.claims).toMatchObject({ statements: 3, tasks: 3, empty: 0 });
    expect(worker.runningCount).toBe(0);
  });

  it("never runs more than its capacity while the claim loop claims at the same time", async () => {
    const clock = new FakeClock(1_000);
    const store = new FakeTaskClaimer(clock);
    // Claims and finishes take 2 ms, so the loop's claims (a 3 ms tick) overlap the finishes'.
    store.latencyMs = 2;
    const ids = Array.from({ length: 60 }, (_, i) => `t${i}`);
    let maxRunning = 0;
    let worker: Worker | null = null;
    const sample = (): void => {
      maxRunning = Math.max(maxRunning, worker?.runningCount ?? 0);
    };
    // A started task's first call is its renewal, made as soon as it enters the worker's count.
    const renew = store.renewTaskLease.bind(store);
    store.renewTaskLease = (token, leaseMs) => {
      sample();
      return renew(token, leaseMs);
    };
    // Count the loop's claims that were sent while a finish's claim was in flight, and the reverse.
    let claiming = 0;
    let handing = 0;
    let overlapped = 0;
    const claimTasks = store.claimTasks.bind(store);
    store.claimTasks = async (offer, max) => {
      claiming += 1;
      if (handing > 0) overlapped += 1;
      try {
        return await claimTasks(offer, max);
      } finally {
        claiming -= 1;
      }
    };
    const finishAndClaim = store.finishAndClaim.bind(store);
    store.finishAndClaim = async (token, res, offer, max) => {
      handing += 1;
      if (claiming > 0) overlapped += 1;
      try {
        return await finishAndClaim(token, res, offer, max);
      } finally {
        handing -= 1;
      }
    };
    const executor = new TimedExecutor(clock, sample);
    worker = newWorker(clock, store, executor, { capacity: 3, pollMs: 3 });
    worker.start();
    // Tasks arrive in bursts of 5 every 10 ms: the queue runs dry between bursts (slots free with
    // nothing to hand on, the loop's tick claims them) and is deep within one (finishes hand on).
    let added = 0;
    for (let i = 0; i < 2_000 && store.finishedTasks.length < ids.length; i += 1) {
      if (i % 10 === 0)
        for (const id of ids.slice(added, (added += 5))) store.add(taskRecord("run-1", id, action.name));
      await clock.advance(1);
      sample();
    }
    expect([...store.finishedTasks].sort()).toEqual(ids.map((id) => `run-1/${id}`).sort());
    expect(executor.maxActive).toBe(3);
    expect(maxRunning).toBe(3);
    const c = worker.claims;
    expect(c.tasks).toBe(ids.length);
    expect(c.byCause.finish?.tasks ?? 0).toBeGreaterThan(0);
    expect(c.byCause.tick?.tasks ?? 0).toBeGreaterThan(0);
    expect(overlapped).toBeGreaterThan(0);
  });

  it("only finishes while stopping: nothing more is claimed", async () => {
    const { clock, store, worker, executor } = await busyWorker();
    const stopped = worker.stop();
    await succeed(executor, clock);
    await stopped;
    expect(claimOps(store)).toEqual(["claims", "finish"]);
    expect(store.finishedTasks).toEqual(["run-1/a"]);
    expect(worker.claims).toMatchObject({ statements: 1, tasks: 1 });
    expect(worker.runningCount).toBe(0);
  });

  it("claims nothing when the finish is refused, and the freed slot claims as before", async () => {
    const { clock, store, worker, executor } = await busyWorker();
    store.finishAndClaimError = new ConflictError(
      "finish task",
      { status: "running" },
      { status: "canceling" },
    );
    await succeed(executor, clock); // a: refused; its slot frees and the loop claims b
    await succeed(executor, clock); // b: refused too; the loop claims c
    store.finishAndClaimError = null;
    await succeed(executor, clock); // c: nothing left, a plain finish
    expect(claimOps(store)).toEqual([
      "claims",
      "claim-after-finish",
      "claims",
      "claim-after-finish",
      "claims",
      "finish",
    ]);
    expect(store.finishedTasks).toEqual(["run-1/c"]);
    expect(store.calls.filter((c) => c.op === "claim")).toHaveLength(3);
    expect(worker.claims.byCause).toEqual({
      start: { statements: 1, empty: 0, tasks: 1 },
      self: { statements: 2, empty: 0, tasks: 2 },
    });
    expect(worker.runningCount).toBe(0);
  });

  it("retries a finish that failed with a plain finish, then the freed slot claims", async () => {
    const { clock, store, worker, executor } = await busyWorker();
    store.finishAndClaimError = new StoreError("finish task", { cause: new Error("connection reset") });
    await succeed(executor, clock);
    expect(store.finishedTasks).toEqual([]);
    await clock.advance(100); // STORE_CALL_BACKOFF's first wait
    await settle(20);
    expect(claimOps(store)).toEqual(["claims", "claim-after-finish", "finish", "claims"]);
    expect(store.finishedTasks).toEqual(["run-1/a"]);
    expect(worker.claims.byCause.self).toEqual({ statements: 1, empty: 0, tasks: 1 });
    expect(worker.runningCount).toBe(1);
  });

  it("claims when the waiting task its finish heard of becomes ready, not at the next tick", async () => {
    const { clock, store, worker, executor } = await busyWorker();
    store.nextReadyInMs = 500;
    await succeed(executor, clock); // a: claims b
    await succeed(executor, clock); // b: claims c, and hears that a task waits 500 ms
    await succeed(executor, clock); // c: a plain finish; the slot frees, nothing is ready yet
    const before = worker.claims.statements;
    await clock.advance(600);
    expect(worker.claims.statements).toBe(before + 1);
    expect(worker.claims.byCause.notBefore).toEqual({ statements: 1, empty: 1, tasks: 0 });
  });
});
