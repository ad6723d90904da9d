// The Worker's claim on a fake clock and an in-memory claimer: it abandons an action it can no
// longer prove it holds (at termAt, writing nothing), stops at once when deposed, and records the
// outcome while its lease holds. No store, no processes, no real time.
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import type { WorkerSettings } from "../../src/app/worker.js";
import { FINISH_KEEP_LEASES, Worker } from "../../src/app/worker.js";
import type { ActionDefinition, ExecRequest, ExecResult, Executor } from "../../src/ports/executor.js";
import { FakeClock, settle } from "../support/fake-clock.js";
import { FakeTaskClaimer, taskRecord } from "../support/fake-task-claimer.js";

const TTL = 10_000;
const RENEW_EVERY = 3_000;
const MARGIN = 1_000;
const KILL_GRACE = 2_000;
const START = 1_000;

const action: ActionDefinition = {
  name: "work",
  argv: ["/bin/true"],
  args: {},
  cwd: null,
  env: {},
  timeoutMs: 60_000,
  outputLimitBytes: 1024,
  killGraceMs: KILL_GRACE,
};

/** An executor whose action runs until the test ends it or the worker aborts it. */
class HeldExecutor implements Executor {
  readonly started: number[] = [];
  readonly aborted: number[] = [];
  private finish: ((r: ExecResult) => void) | null = null;

  constructor(private readonly clock: FakeClock) {}

  run(request: ExecRequest): Promise<ExecResult> {
    this.started.push(this.clock.monotonicMs());
    return new Promise<ExecResult>((resolve) => {
      this.finish = resolve;
      request.signal?.addEventListener(
        "abort",
        () => {
          this.aborted.push(this.clock.monotonicMs());
          resolve(result("killed", null));
        },
        { once: true },
      );
    });
  }

  succeed(): void {
    this.finish?.(result("succeeded", 0));
  }
}

function result(outcome: ExecResult["outcome"], exitCode: number | null): ExecResult {
  return {
    outcome,
    exitCode,
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

/** A capacity-1 worker started on one queued task; `prepare` sets the store up before the start. */
async function claimed(
  prepare: (store: FakeTaskClaimer) => void = () => {},
): Promise<{ clock: FakeClock; store: FakeTaskClaimer; executor: HeldExecutor }> {
  const clock = new FakeClock(START);
  const store = new FakeTaskClaimer(clock);
  const executor = new HeldExecutor(clock);
  store.add(taskRecord("run-1", "a", action.name));
  prepare(store);
  const settings: WorkerSettings = {
    session: { nodeId: "n1", bootId: "b1" },
    roomIds: ["!room:test"],
    labels: [],
    capacity: 1,
    actions: new Map([[action.name, action]]),
    taskLeaseMs: TTL,
    renewEveryMs: RENEW_EVERY,
    marginMs: MARGIN,
    pollMs: 60_000,
    debounceMs: 0,
  };
  const worker = new Worker(settings, { store, executor, clock, logger: silentLogger() });
  workers.push(worker);
  worker.start();
  await settle();
  return { clock, store, executor };
}

describe("Worker lease", () => {
  it("starts on a fresh claim at once, renews every renew_every while the action runs, and records its end", async () => {
    const { clock, store, executor } = await claimed();
    expect(executor.started).toEqual([START]);
    await clock.advance(4 * RENEW_EVERY);
    // The claim was sent at START: no renewal before the start, the first one renew_every after it.
    expect(store.calls.filter((c) => c.op === "renew:grant").map((c) => c.at)).toEqual([
      START + 3_000,
      START + 6_000,
      START + 9_000,
      START + 12_000,
    ]);
    executor.succeed();
    await settle();
    expect(store.finished.map((r) => r.outcome)).toEqual(["succeeded"]);
  });

  it("abandons the action at termAt (ttl − margin − kill_grace after the last renewal's send) and writes nothing", async () => {
    const { clock, store, executor } = await claimed();
    store.renewals = "hang";
    const termAt = START + TTL - MARGIN - KILL_GRACE;
    await clock.advance(termAt - START - 1);
    expect(executor.aborted).toEqual([]);
    await clock.advance(1);
    expect(executor.aborted).toEqual([termAt]);
    await clock.advance(TTL);
    expect(store.calls.some((c) => c.op === "finish")).toBe(false);
  });

  it("abandons it the same way when renewals fail fast, retrying them sooner meanwhile", async () => {
    const { clock, store, executor } = await claimed();
    store.renewals = "fail";
    await clock.advance(TTL);
    expect(executor.aborted).toEqual([START + TTL - MARGIN - KILL_GRACE]);
    expect(store.calls.filter((c) => c.op === "renew:fail").length).toBeGreaterThan(1);
    expect(store.finished).toEqual([]);
  });

  it("once the store answers again, releases the attempt it stopped with the words why", async () => {
    const { clock, store, executor } = await claimed();
    store.renewals = "fail";
    const termAt = START + TTL - MARGIN - KILL_GRACE;
    await clock.advance(termAt - START);
    expect(executor.aborted).toEqual([termAt]);
    await clock.advance(RENEW_EVERY);
    expect(store.releases).toEqual([]);
    store.renewals = "grant";
    await clock.advance(2 * RENEW_EVERY);
    expect(store.releases).toHaveLength(1);
    expect(store.releases[0]).toMatch(/^the store was unreachable for [0-9.]+s$/);
    expect(store.finished).toEqual([]);
  });

  it("kills the action at the first renewal the store refuses (deposed) and writes nothing", async () => {
    const { clock, store, executor } = await claimed();
    store.renewals = "conflict";
    await clock.advance(RENEW_EVERY);
    expect(executor.aborted).toEqual([START + RENEW_EVERY]);
    await clock.advance(TTL);
    expect(store.finished).toEqual([]);
  });

  it("renews a claim answered margin or more after its send just before starting, and counts from that renewal", async () => {
    const { clock, store, executor } = await claimed((s) => {
      s.latencyMs = MARGIN;
    });
    await clock.advance(MARGIN);
    await settle();
    expect(store.calls.filter((c) => c.op === "renew:grant").map((c) => c.at)).toEqual([START + MARGIN]);
    expect(executor.started).toEqual([START + MARGIN]);
    await clock.advance(RENEW_EVERY);
    expect(store.calls.filter((c) => c.op === "renew:grant").map((c) => c.at)).toEqual([
      START + MARGIN,
      START + MARGIN + RENEW_EVERY,
    ]);
  });

  it("never starts an action on a claim answered late whose pre-start renewal is refused", async () => {
    const { clock, store, executor } = await claimed((s) => {
      s.latencyMs = MARGIN;
      s.renewals = "conflict";
    });
    await clock.advance(TTL);
    expect(executor.started).toEqual([]);
    expect(store.finished).toEqual([]);
  });

  it("keeps the lease renewed while the store fails the finish, so the finish lands after the store is back and the reaper never runs the ended action again", async () => {
    const { clock, store, executor } = await claimed();
    // The store fails every finish for two and a half leases after the action ends.
    const endsAt = START + 1_000;
    store.finishFailsUntil = endsAt + 2.5 * TTL;
    await clock.advance(1_000);
    executor.succeed();
    await settle();
    for (let t = 0; t < 3 * TTL; t += 500) await clock.advance(500);
    expect(store.finished.map((r) => r.outcome)).toEqual(["succeeded"]);
    const finishes = store.calls.filter((c) => c.op === "finish" || c.op === "claim-after-finish");
    const landed = finishes[finishes.length - 1]!.at;
    expect(landed).toBeGreaterThanOrEqual(store.finishFailsUntil);
    // Renewed every renew_every from the last renewal before the end until the finish landed: the
    // lease never lapsed (no gap between renewals, or before the finish, longer than the lease).
    const renewals = store.calls.filter((c) => c.op === "renew:grant").map((c) => c.at);
    const held = [START, ...renewals.filter((at) => at <= landed), landed];
    for (let i = 1; i < held.length; i++) expect(held[i]! - held[i - 1]!).toBeLessThan(TTL);
  });

  it("stops renewing after FINISH_KEEP_LEASES leases of failed finishes, and gives up with the lease", async () => {
    const { clock, store, executor } = await claimed();
    store.finishFailsUntil = Number.POSITIVE_INFINITY;
    executor.succeed();
    await settle();
    for (let t = 0; t < 6 * TTL; t += 500) await clock.advance(500);
    expect(store.finished).toEqual([]);
    const renewals = store.calls.filter((c) => c.op === "renew:grant").map((c) => c.at);
    expect(Math.max(...renewals)).toBeLessThanOrEqual(START + FINISH_KEEP_LEASES * TTL);
    const tries = store.calls.filter((c) => c.op === "finish" || c.op === "claim-after-finish");
    // Once the lease it stopped renewing has passed, it tries no more: the worker gave up.
    expect(tries[tries.length - 1]!.at).toBeLessThan(Math.max(...renewals) + 2 * TTL);
    expect(tries.length).toBeGreaterThan(3);
  });
});
