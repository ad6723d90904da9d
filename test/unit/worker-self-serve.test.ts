// The Worker serves itself only on a fresh word: a slot freed while its last claim left fitting
// tasks behind goes to the next task at once (in the finish's commit) if that claim was answered
// within SELF_SERVE_MS, and otherwise waits for the leader's wake (other nodes have claimed since; the leader stops counting on this
// node after the same time). Fake clock, in-memory claimer, no store, no processes.
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { SELF_SERVE_MS } from "../../src/app/wake-targets.js";
import { Worker } from "../../src/app/worker.js";
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

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ abortRunning: true })));
});

async function busyWorker(): Promise<{ clock: FakeClock; worker: Worker; executor: HeldExecutor }> {
  const clock = new FakeClock(1_000);
  const store = new FakeTaskClaimer(clock);
  const executor = new HeldExecutor();
  // Capacity 1 and three tasks: the first claim takes one and leaves more.
  for (const id of ["a", "b", "c"]) store.add(taskRecord("run-1", id, action.name));
  const worker = new Worker(
    {
      session: { nodeId: "n1", bootId: "b1" },
      roomIds: ["!room:test"],
      labels: [],
      capacity: 1,
      actions: new Map([[action.name, action]]),
      taskLeaseMs: 10_000,
      pollMs: 60_000,
      debounceMs: 0,
    },
    { store, executor, clock, logger: silentLogger() },
  );
  workers.push(worker);
  worker.start();
  await settle();
  expect(worker.claims).toMatchObject({ statements: 1, tasks: 1 });
  return { clock, worker, executor };
}

describe("Worker self-serve", () => {
  it("hands a slot freed within SELF_SERVE_MS of a claim that left more to the next task, in the finish's commit", async () => {
    const { clock, worker, executor } = await busyWorker();
    await clock.advance(SELF_SERVE_MS - 50);
    executor.succeedOldest();
    await clock.advance(0);
    await settle(20);
    expect(worker.claims).toMatchObject({ statements: 2, tasks: 2 });
    expect(worker.claims.byCause.finish).toEqual({ statements: 1, empty: 0, tasks: 1 });
    expect(worker.claims.byCause.self).toBeUndefined();
  });

  it("leaves a slot freed later to the leader's wake: no claim until the safety tick", async () => {
    const { clock, worker, executor } = await busyWorker();
    await clock.advance(SELF_SERVE_MS + 50);
    executor.succeedOldest();
    await clock.advance(0);
    await settle(20);
    await clock.advance(30_000);
    expect(worker.claims.statements).toBe(1);
    await clock.advance(30_000);
    expect(worker.claims).toMatchObject({ statements: 2, tasks: 2, tick: 1 });
  });
});
