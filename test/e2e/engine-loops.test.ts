// The engine loops in one process over a real SQLite file: how leadership ends (stop, deposed,
// TTL passed locally with the store hanging) and how a worker reacts to a lost lease or a cancel.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { createProcessExecutor } from "../../src/adapters/exec/process-executor.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import type { LeadEnd } from "../../src/app/lease-keeper.js";
import { LeaseKeeper } from "../../src/app/lease-keeper.js";
import { DEFAULT_LEADER_TIMINGS, runLeaderLoop } from "../../src/app/leader.js";
import { runScheduleLoop } from "../../src/app/schedules.js";
import { whenAborted } from "../../src/app/wake.js";
import { Worker } from "../../src/app/worker.js";
import type { EngineNode, EngineSettings } from "../../src/app/node.js";
import { startEngineNode } from "../../src/app/node.js";
import { parseDag } from "../../src/domain/dag.js";
import type { ActionDefinition, ExecResult, Executor } from "../../src/ports/executor.js";
import type { LeaderFence, Session, Store } from "../../src/ports/store.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { waitFor } from "../support/store-wait.js";
import { FakeClock } from "../support/fake-clock.js";
import { walCommits } from "../support/wal-commits.js";
import { cmd, dag, runInput, task } from "../support/store-fixtures.js";

const ROOM = "room";
const logger = silentLogger();
let db: SqliteTestDb | null = null;
const open: Store[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async (ctx) => {
  for (const c of cleanups.splice(0)) await c();
  for (const s of open.splice(0)) await s.close();
  db?.cleanup(ctx.task.result?.state === "fail");
  db = null;
});

async function store(clockOffsetMs = 0): Promise<Store> {
  db ??= sqliteTestDb("engine-loops");
  const s = await db.open(clockOffsetMs === 0 ? {} : { clock: () => Date.now() + clockOffsetMs });
  open.push(s);
  return s;
}

function keeper(s: Store, session: Session, overrides: { renewLease?: Store["renewLease"] } = {}) {
  const changes: Array<{ term: number | null; end: LeadEnd | undefined }> = [];
  const signals: AbortSignal[] = [];
  const k = new LeaseKeeper({
    store: { ...bind(s), ...overrides },
    clock: systemClock,
    logger,
    session,
    roomId: ROOM,
    timings: { ttlMs: 800, renewEveryMs: 150, acquireEveryMs: 150 },
    lead: async (_fence, leadSignal) => {
      signals.push(leadSignal);
      await whenAborted(leadSignal);
    },
    onChange: (fence, end) => changes.push({ term: fence?.term ?? null, end }),
  });
  cleanups.push(() => k.stop());
  // The first leadership's signal: after losing it, the keeper may well lead again.
  return { k, changes, signal: () => signals[0] };
}

/** Waits until the keeper leads, and returns its fence. */
async function leading(k: LeaseKeeper): Promise<LeaderFence> {
  return (await waitFor(
    "leading",
    () => k.fence,
    (f) => f !== null,
  ))!;
}

/** The store's methods bound to it, so a test can replace one of them. */
function bind(s: Store): Store {
  const out: Record<string, unknown> = { kind: s.kind };
  for (const key of Object.keys(s) as Array<keyof Store>) {
    const v = s[key];
    out[key] = typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(s) : v;
  }
  return out as unknown as Store;
}

describe("lease keeper", () => {
  it("leads, renews past its TTL, and on stop ends the leader work and releases the lease", async () => {
    const s = await store();
    const { k, changes, signal } = keeper(s, { nodeId: "a", bootId: "1" });
    k.start();
    const fence = await leading(k);
    const first = (await s.getLease(ROOM))!.expiresAt;
    // Renewed well past the first expiry while still the same term.
    await waitFor(
      "renewed past the TTL",
      () => s.getLease(ROOM),
      (l) => l!.expiresAt > first + 1_000,
    );
    expect(k.fence?.term).toBe(fence.term);
    await k.stop();
    expect(signal()?.aborted).toBe(true);
    expect((await s.getLease(ROOM))?.holder).toBeNull();
    expect(changes).toEqual([
      { term: fence.term, end: undefined },
      { term: null, end: "stopping" },
    ]);
  });

  it("a newer term deposes it: the leader work stops and it does not release the new holder's lease", async () => {
    const s = await store();
    const { k, changes, signal } = keeper(s, { nodeId: "a", bootId: "1" });
    k.start();
    const fence = await leading(k);
    // Another node whose clock is a minute ahead sees the lease expired and takes it.
    const later = await store(60_000);
    const taken = await later.acquireLease(ROOM, { nodeId: "b", bootId: "2" }, 60_000);
    expect(taken.term).toBe(fence.term + 1);
    await waitFor(
      "deposed",
      () => changes.length,
      (n) => n === 2,
    );
    expect(changes[1]).toEqual({ term: null, end: "deposed" });
    expect(signal()?.aborted).toBe(true);
    await k.stop();
    expect((await s.getLease(ROOM))?.holder).toEqual({ nodeId: "b", bootId: "2" });
  });

  it("stops leading once the TTL passes on its own clock while the store hangs", async () => {
    const s = await store();
    const hang: Store["renewLease"] = () => new Promise(() => {});
    const { k, changes, signal } = keeper(s, { nodeId: "a", bootId: "1" }, { renewLease: hang });
    k.start();
    await leading(k);
    await waitFor(
      "leadership ended",
      () => changes.length,
      (n) => n >= 2,
      { timeoutMs: 5_000 },
    );
    expect(changes[1]).toEqual({ term: null, end: "expired" });
    expect(signal()?.aborted).toBe(true);
  });
});

describe("leader loop", () => {
  it("treats a rejected fenced write as deposed and returns", async () => {
    const s = await store();
    const old = await s.acquireLease(ROOM, { nodeId: "a", bootId: "1" }, 60_000);
    await s.releaseLease(old);
    await s.acquireLease(ROOM, { nodeId: "b", bootId: "2" }, 60_000);
    let deposed = 0;
    const stop = new AbortController();
    cleanups.push(async () => stop.abort());
    await runLeaderLoop(
      { store: s, clock: systemClock, logger, timings: DEFAULT_LEADER_TIMINGS, processInbox: null },
      { roomId: ROOM, session: old.session, term: old.term },
      stop.signal,
      () => (deposed += 1),
    );
    expect(deposed).toBe(1);
  });

  it("ticks every idleTickMs while nothing in the room could expire, every safetyTickMs while something could", async () => {
    const s = await store();
    const acquired = await s.acquireLease(ROOM, { nodeId: "a", bootId: "1" }, 600_000);
    const fence = { roomId: ROOM, session: acquired.session, term: acquired.term };
    let reaps = 0;
    const counted: Store = Object.create(s) as Store;
    counted.reap = (f) => {
      reaps += 1;
      return s.reap(f);
    };
    const clock = new FakeClock();
    const stop = new AbortController();
    const loop = runLeaderLoop(
      {
        store: counted,
        clock,
        logger,
        timings: { debounceMs: 0, safetyTickMs: 1_000, idleTickMs: 10_000 },
        processInbox: null,
      },
      fence,
      stop.signal,
      () => {},
    );
    cleanups.push(async () => {
      stop.abort();
      await loop;
    });
    await waitFor(
      "the first pass",
      () => reaps,
      (n) => n >= 1,
      { timeoutMs: 5_000 },
    );
    await clock.advance(9_000);
    expect(reaps).toBe(1);
    await clock.advance(1_000);
    expect(reaps).toBe(2);
    // A run waiting for confirmation can expire: the leader looks every second again.
    const created = await s.createRun(
      cmd(fence),
      runInput(ROOM, dag("wait", [task("t")]), {
        needsConfirmation: true,
        confirmTimeoutMs: 600_000,
      }),
    );
    expect(created.kind).toBe("created");
    // Its "runs" change woke the leader; from then on it ticks at the safety tick.
    await waitFor(
      "the pass the change caused",
      () => reaps,
      (n) => n >= 3,
      { timeoutMs: 5_000 },
    );
    const before = reaps;
    await clock.advance(3_000);
    expect(reaps - before).toBe(3);
  });
});

describe("leader loop under a stream of finished tasks", () => {
  it("still reaps at least once per safety tick while finishes keep waking it into scheduling-only passes", async () => {
    const s = await store();
    const acquired = await s.acquireLease(ROOM, { nodeId: "a", bootId: "1" }, 600_000);
    const fence = { roomId: ROOM, session: acquired.session, term: acquired.term };
    let reaps = 0;
    let schedules = 0;
    const heard: Array<Parameters<Store["onChange"]>[0]> = [];
    const counted: Store = Object.create(s) as Store;
    counted.reap = (f) => {
      reaps += 1;
      return s.reap(f);
    };
    counted.scheduleStep = (f) => {
      schedules += 1;
      return s.scheduleStep(f);
    };
    counted.onChange = (listener) => {
      heard.push(listener);
      return s.onChange(listener);
    };
    const clock = new FakeClock();
    const stop = new AbortController();
    const loop = runLeaderLoop(
      { store: counted, clock, logger, timings: { debounceMs: 15, safetyTickMs: 1_000 }, processInbox: null },
      fence,
      stop.signal,
      () => {},
    );
    cleanups.push(async () => {
      stop.abort();
      await loop;
    });
    await waitFor(
      "the first pass",
      () => reaps,
      (n) => n >= 1,
      { timeoutMs: 5_000 },
    );
    // A task of the room ends every 100 ms (fake) for 3 s: each wakes a pass at once.
    for (let i = 0; i < 30; i++) {
      const before = schedules;
      for (const listener of heard) listener("done", ROOM);
      await waitFor(
        "the pass the finish started",
        () => schedules,
        (n) => n > before,
        { timeoutMs: 5_000 },
      );
      await clock.advance(100);
    }
    expect(schedules).toBeGreaterThanOrEqual(31);
    // Most passes were scheduling-only, but the reaper still came once per second of them.
    expect(reaps).toBeGreaterThanOrEqual(3);
    expect(reaps).toBeLessThan(10);
  });
});

describe("schedule loop", () => {
  it("reads the store only when a run changes or a known definition's slot comes, not every 200 ms", async () => {
    // The store's clock is the loop's, so a slot comes when the fake time says.
    const clock = new FakeClock(1_000, Date.UTC(2030, 0, 1, 0, 0, 0, 500));
    db ??= sqliteTestDb("engine-loops");
    const s = await db.open({ clock: () => clock.wallMs() });
    open.push(s);
    const acquired = await s.acquireLease(ROOM, { nodeId: "a", bootId: "1" }, 600_000);
    const fence = { roomId: ROOM, session: acquired.session, term: acquired.term };
    let rounds = 0;
    const counted: Store = Object.create(s) as Store;
    counted.now = () => {
      rounds += 1;
      return s.now();
    };
    const stop = new AbortController();
    const loop = runScheduleLoop({ store: counted, clock, feed: s }, logger, fence, stop.signal, () => {});
    cleanups.push(async () => {
      stop.abort();
      await loop;
    });
    await waitFor(
      "the first round",
      () => rounds,
      (n) => n >= 1,
      { timeoutMs: 5_000 },
    );
    await clock.advance(9_000);
    expect(rounds).toBe(1);
    // A scheduled definition announces itself (a "runs" change); then its slots, every second, set the rounds.
    const everySecond = { cron: "* * * * * *", timezone: "UTC", missed: "skip" as const };
    await s.createRun(cmd(fence), runInput(ROOM, { ...dag("tick", [task("t")]), schedule: everySecond }));
    await waitFor(
      "the round the change caused",
      () => rounds,
      (n) => n >= 2,
      { timeoutMs: 5_000 },
    );
    const before = rounds;
    await clock.advance(3_000);
    // One round per slot and one for the run each slot fired (its own "runs" change); every 200 ms would be 15.
    expect(rounds - before).toBeGreaterThanOrEqual(3);
    expect(rounds - before).toBeLessThanOrEqual(6);
  });
});

const sleepAction: ActionDefinition = {
  name: "sleep",
  argv: ["sleep", "{seconds}"],
  args: { seconds: { pattern: "[0-9]{1,3}" } },
  cwd: null,
  env: {},
  timeoutMs: 60_000,
  outputLimitBytes: 4096,
  killGraceMs: 200,
};

/** A run of `tasks` created under a leader's `fence`; its run id. */
async function runUnder(
  s: Store,
  fence: LeaderFence,
  dagId: string,
  tasks: readonly object[],
): Promise<string> {
  const parsed = parseDag(JSON.stringify({ id: dagId, tasks }), "json");
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const created = await s.createRun(
    { fence },
    {
      roomId: ROOM,
      dag: parsed.dag,
      hash: parsed.hash,
      publisher: "test",
      publishEventId: null,
      needsConfirmation: false,
      confirmTimeoutMs: 60_000,
    },
  );
  if (created.kind !== "created") throw new Error(created.kind);
  return created.run.runId;
}

/** A run with one 30 s sleep, queued by a leader whose fence is returned. */
async function queuedSleep(s: Store, retries: number): Promise<{ fence: LeaderFence; runId: string }> {
  const acquired = await s.acquireLease(ROOM, { nodeId: "leader", bootId: "1" }, 30_000);
  const fence = { roomId: ROOM, session: acquired.session, term: acquired.term };
  const runId = await runUnder(s, fence, "nap", [
    { id: "nap", action: "sleep", args: { seconds: 30 }, retries },
  ]);
  await s.scheduleStep(fence);
  return { fence, runId };
}

function worker(
  s: Store,
  nodeId: string,
  override: Partial<Store> = {},
  options: { marginMs?: number; executor?: Executor } = {},
): Worker {
  const w = new Worker(
    {
      session: { nodeId, bootId: "1" },
      roomIds: [ROOM],
      labels: [],
      capacity: 1,
      actions: new Map([["sleep", sleepAction]]),
      taskLeaseMs: 900,
      ...(options.marginMs === undefined ? {} : { marginMs: options.marginMs }),
      pollMs: 200,
      debounceMs: 10,
    },
    {
      store: { ...bind(s), ...override },
      executor: options.executor ?? createProcessExecutor(),
      clock: systemClock,
      logger,
    },
  );
  cleanups.push(() => w.stop({ abortRunning: true }));
  return w;
}

describe("worker", () => {
  it("kills the action and writes nothing when its task lease is taken away", async () => {
    const s = await store();
    const { runId } = await queuedSleep(s, 1);
    const w = worker(s, "w1");
    w.start();
    await waitFor(
      "running",
      () => s.getTask(runId, "nap"),
      (t) => t?.status === "running",
    );
    // A leader a minute ahead sees the task lease expired and requeues it for attempt 2.
    const later = await store(60_000);
    const next = await later.acquireLease(ROOM, { nodeId: "leader2", bootId: "1" }, 60_000);
    const reaped = await later.reap({ roomId: ROOM, session: next.session, term: next.term });
    expect(reaped.requeued).toBe(1);
    await waitFor(
      "the worker let go",
      () => w.runningCount,
      (n) => n === 0,
      { timeoutMs: 5_000 },
    );
    const task = await s.getTask(runId, "nap");
    expect(task).toMatchObject({ status: "queued", attempt: 2, exitCode: null, finishedAt: null });
    const events = await s.readEvents(ROOM, 0, 1000);
    expect(events.filter((e) => e.actor?.startsWith("w1/") && e.kind !== "task.running")).toEqual([]);
  });

  it("stops its action when renewals hang past its lease, and writes nothing while the store does not answer", async () => {
    const s = await store();
    const { runId } = await queuedSleep(s, 0);
    // The store hangs for this worker: its renewals, and the hand-back it would make once answered.
    const real = createProcessExecutor();
    let ended = 0;
    const executor: Executor = {
      run: async (request) => {
        const result = await real.run(request);
        ended += 1;
        return result;
      },
    };
    const w = worker(
      s,
      "w1",
      { renewTaskLease: () => new Promise(() => {}), releaseTask: () => new Promise(() => {}) },
      { executor },
    );
    w.start();
    await waitFor(
      "running",
      () => s.getTask(runId, "nap"),
      (t) => t?.status === "running",
    );
    await waitFor(
      "the worker stopped its action",
      () => ended,
      (n) => n === 1,
      { timeoutMs: 5_000 },
    );
    // Still running in the store: only the leader's reaper may move it once the lease has expired.
    expect(await s.getTask(runId, "nap")).toMatchObject({ status: "running", finishedAt: null });
  });

  it("stops its action before the lease could expire when renewals fail, and writes nothing", async () => {
    const s = await store();
    const { runId } = await queuedSleep(s, 0);
    // The claim's re-check and one renewal go through; then the store fails every renewal.
    let renewals = 0;
    const failing: Partial<Store> = {
      renewTaskLease: (...args) =>
        ++renewals <= 2 ? s.renewTaskLease(...args) : Promise.reject(new Error("store unreachable")),
      // Unreachable for the hand-back too (once answered, the worker hands the stopped attempt back
      // with its words: test/e2e/store-outage.test.ts).
      releaseTask: () => Promise.reject(new Error("store unreachable")),
    };
    const real = createProcessExecutor();
    const runs: Array<{ startedAt: number; endedAt: number; result: ExecResult }> = [];
    const executor: Executor = {
      run: async (request) => {
        const startedAt = Date.now();
        const result = await real.run(request);
        runs.push({ startedAt, endedAt: Date.now(), result });
        return result;
      },
    };
    // ttl 900 ms, renew every 300, margin 300, kill_grace 200: SIGTERM 400 ms after the last renewal sent.
    const w = worker(s, "w1", failing, { marginMs: 300, executor });
    w.start();
    await waitFor(
      "the action stopped",
      () => runs.length,
      (n) => n === 1,
      { timeoutMs: 5_000 },
    );
    const task = await s.getTask(runId, "nap");
    // Still running in the store, and its lease not yet expired when the action (and its group) was gone.
    expect(task).toMatchObject({ status: "running", finishedAt: null });
    // Stopped at termAt by the worker ("killed") or, the same instant, by the supervisor ("expired").
    expect(["killed", "expired"]).toContain(runs[0]!.result.outcome);
    expect(runs[0]!.endedAt).toBeLessThan(task!.leaseExpiresAt!);
    expect(renewals).toBeGreaterThan(2);
  });

  it("stops a task whose run is canceled and records it canceled", async () => {
    const s = await store();
    const { fence, runId } = await queuedSleep(s, 0);
    const w = worker(s, "w1");
    w.start();
    await waitFor(
      "running",
      () => s.getTask(runId, "nap"),
      (t) => t?.status === "running",
    );
    const canceled = await s.cancelRun({ fence }, ROOM, "nap", "test");
    expect(canceled.kind).toBe("done");
    await waitFor(
      "task canceled",
      () => s.getTask(runId, "nap"),
      (t) => t?.status === "canceled",
      { timeoutMs: 5_000 },
    );
    await s.deriveRunOutcomes(fence);
    expect((await s.getRunById(runId))?.status).toBe("canceled");
    expect(w.runningCount).toBe(0);
  });
});

describe("node", () => {
  it("applies its configured room cap to a room that never had one, and leaves a set cap alone", async () => {
    const s = await store();
    await s.setRoomCap("other", 2);
    const settings: EngineSettings = {
      nodeId: "capper",
      labels: [],
      capacity: 1,
      roomIds: [ROOM, "other"],
      actions: new Map(),
      lease: { ttlMs: 800, renewEveryMs: 150, acquireEveryMs: 150 },
      leader: DEFAULT_LEADER_TIMINGS,
      taskLeaseMs: 800,
      heartbeatEveryMs: 150,
      workerPollMs: 150,
      work: false,
      initialCap: 5,
    };
    const node = startEngineNode(settings, {
      store: s,
      executor: createProcessExecutor(),
      clock: systemClock,
      logger,
      processInbox: null,
    });
    cleanups.push(() => node.stop());
    await waitFor(
      "the configured cap applied",
      () => s.getRoomCap(ROOM),
      (cap) => cap === 5,
    );
    expect(await s.getRoomCap("other")).toBe(2);
  });
});

/**
 * A run of `tasks` created under a lease the node under test then takes over, so that the node's
 * first pass schedules it; its run id.
 */
async function createdRun(s: Store, dagId: string, tasks: readonly object[]): Promise<string> {
  const setup = await s.acquireLease(ROOM, { nodeId: "setup", bootId: "1" }, 30_000);
  const fence = { roomId: ROOM, session: setup.session, term: setup.term };
  const runId = await runUnder(s, fence, dagId, tasks);
  await s.releaseLease(fence);
  return runId;
}

/**
 * A node that leads and works in ROOM, with one action, `capacity` slots and every tick at a minute,
 * so that nothing but the store's changes moves its work along within a test's wait.
 */
function runner(s: Store, action: ActionDefinition, capacity: number, debounceMs = 60_000): EngineNode {
  const minute = 60_000;
  return startEngineNode(
    {
      nodeId: "runner",
      labels: [],
      capacity,
      roomIds: [ROOM],
      actions: new Map([[action.name, action]]),
      lease: { ttlMs: 10_000, renewEveryMs: 3_000, acquireEveryMs: 150 },
      leader: { debounceMs, safetyTickMs: minute },
      taskLeaseMs: 10_000,
      heartbeatEveryMs: minute,
      workerPollMs: minute,
      work: true,
    },
    { store: s, executor: createProcessExecutor(), clock: systemClock, logger, processInbox: null },
  );
}

describe("dependencies", () => {
  it("a finished task's dependent is scheduled and claimed on the finish alone, with the debounce and every tick at a minute", async () => {
    const s = await store();
    const tasks = ["a", "b", "c", "d"].map((id, i) => ({
      id,
      action: "true",
      ...(i > 0 ? { needs: [["a", "b", "c"][i - 1]] } : {}),
    }));
    const runId = await createdRun(s, "chain", tasks);
    const trueAction: ActionDefinition = { ...sleepAction, name: "true", argv: ["true"], args: {} };
    const node = runner(s, trueAction, 1);
    cleanups.push(() => node.stop());
    const run = await waitFor(
      "the chain to succeed",
      () => s.getRunById(runId),
      (r) => r?.status === "succeeded",
      { timeoutMs: 10_000 },
    );
    expect(run?.status).toBe("succeeded");
    expect((await s.listTasks(runId)).map((t) => t.status)).toEqual(Array(4).fill("succeeded"));
  });

  it("claims joined to commits keep the node's slots: never more of its actions at once than its capacity", async () => {
    const s = await store();
    // Four layers of four, each task needing one of the layer before: every finish queues work.
    const id = (l: number, i: number): string => `l${l}t${i}`;
    const tasks = [];
    for (let l = 0; l < 4; l++)
      for (let i = 0; i < 4; i++)
        tasks.push({ id: id(l, i), action: "mark", ...(l > 0 ? { needs: [id(l - 1, i)] } : {}) });
    const runId = await createdRun(s, "layers", tasks);
    // The actions' own record: a line when each starts and when it ends.
    const marks = join(db!.dir, "marks");
    const mark: ActionDefinition = {
      ...sleepAction,
      name: "mark",
      argv: ["sh", "-c", 'echo start >> "$0"; sleep 0.02; echo end >> "$0"', marks],
      args: {},
    };
    const node = runner(s, mark, 2, 5);
    cleanups.push(() => node.stop());
    await waitFor(
      "the run to succeed",
      () => s.getRunById(runId),
      (r) => r?.status === "succeeded",
      { timeoutMs: 20_000 },
    );
    let now = 0;
    let most = 0;
    const lines = readFileSync(marks, "utf8").trim().split("\n");
    for (const line of lines) {
      now += line === "start" ? 1 : -1;
      most = Math.max(most, now);
    }
    expect(lines).toHaveLength(32);
    expect(most).toBe(2);
  });

  it("on SQLite a chain step is one commit: a task's finish, the leader's step and the next task's claim", async () => {
    const s = await store();
    const steps = 12;
    const ids = Array.from({ length: steps }, (_, i) => `t${String(i).padStart(2, "0")}`);
    const tasks = ids.map((id, i) => ({ id, action: "true", ...(i > 0 ? { needs: [ids[i - 1]] } : {}) }));
    const runId = await createdRun(s, "chain", tasks);
    const trueAction: ActionDefinition = { ...sleepAction, name: "true", argv: ["true"], args: {} };
    // One slot: the next task takes the slot of the one whose finish is in the same commit.
    const node = runner(s, trueAction, 1);
    cleanups.push(() => node.stop());
    await waitFor(
      "the first task running",
      () => s.getTask(runId, ids[0]!),
      (t) => t?.status === "running" || t?.status === "succeeded",
    );
    const first = walCommits(db!.path);
    await waitFor(
      "the chain to succeed",
      () => s.getRunById(runId),
      (r) => r?.status === "succeeded",
      { timeoutMs: 10_000 },
    );
    const commits = walCommits(db!.path) - first;
    // Commits that wrote (the WAL's commit frames): each step's one that ends a task, queues its
    // dependent and claims it, and the one that ends the run. The leader's look at the run's outcome
    // after each step writes nothing while tasks are left. Three a step (35 here) when the step and
    // the claim each took a commit of their own.
    expect(commits).toBeGreaterThanOrEqual(steps - 1);
    expect(commits).toBeLessThanOrEqual(steps + 3);
    const log = await s.readEvents(ROOM, 0, 1000);
    expect(log.filter((e) => e.kind === "task.succeeded" && e.runId === runId)).toHaveLength(steps);
  });
});
