/**
 * The graceful stop both node kinds share (src/app/node-lifecycle.ts): it names what it waits for,
 * kills what still runs once the grace passed, and only then ends the heartbeat and removes the row.
 */
import { describe, expect, it } from "vitest";
import type { LogFn, Logger } from "../../src/ports/logger.js";
import type { NodeHeartbeat, Session } from "../../src/ports/store.js";
import type { DrainableWorker } from "../../src/app/node-lifecycle.js";
import { gracefulStop, startHeartbeat } from "../../src/app/node-lifecycle.js";
import { FakeClock, settle } from "../support/fake-clock.js";

const session: Session = { nodeId: "n1", bootId: "b1" };
const shape = {
  labels: ["gpu"],
  capacity: 2,
  roomIds: ["!r"],
  actions: new Map(),
  taskLeaseMs: 60_000,
  workerPollMs: 1_000,
};

function recordingLogger(lines: string[]): Logger {
  const fn: LogFn = (a: Record<string, unknown> | string, b?: string) => {
    lines.push(typeof a === "string" ? a : (b ?? ""));
  };
  const logger: Logger = {
    trace: fn,
    debug: fn,
    info: fn,
    warn: fn,
    error: fn,
    fatal: fn,
    child: () => logger,
  };
  return logger;
}

/** A worker running one task until it is stopped with abortRunning. */
function fakeWorker(calls: string[]): DrainableWorker & { finish(): void } {
  let running = true;
  let ended: () => void = () => {};
  const drained = new Promise<void>((resolve) => (ended = resolve));
  return {
    runningTasks: () =>
      running ? [{ runId: "r1", taskId: "build", action: "make", runningMs: 41_000 }] : [],
    stop: (options = {}) => {
      calls.push(options.abortRunning === true ? "worker killed" : "worker stopping");
      if (options.abortRunning === true) {
        running = false;
        ended();
      }
      return drained;
    },
    finish: () => {
      running = false;
      ended();
    },
  };
}

function setUp() {
  const clock = new FakeClock();
  const calls: string[] = [];
  const lines: string[] = [];
  const logger = recordingLogger(lines);
  const beats: NodeHeartbeat[] = [];
  const store = {
    heartbeat: (beat: NodeHeartbeat) => {
      beats.push(beat);
      return Promise.resolve();
    },
    removeNode: (s: Session) => {
      calls.push(`removed ${s.nodeId}`);
      return Promise.resolve();
    },
  };
  const heartbeat = startHeartbeat(shape, session, 5_000, { store, clock, logger });
  const worker = fakeWorker(calls);
  const stopper = gracefulStop({
    worker,
    heartbeat,
    store,
    session,
    clock,
    logger,
    stoppedMessage: "edge node stopped",
  });
  return { clock, calls, lines, beats, heartbeat, worker, stopper };
}

describe("gracefulStop", () => {
  it("names the task it waits for, kills it once the grace passed, then removes the row", async () => {
    const { clock, calls, lines, heartbeat, stopper } = setUp();
    expect(stopper.requested).toBe(false);
    const stopped = stopper.stop({ graceMs: 8_000 });
    expect(stopper.requested).toBe(true);
    await settle();
    expect(lines).toContain("stopping: waiting up to 8s for task build (make, running for 41s) to finish");
    expect(calls).toEqual(["worker stopping"]);
    expect(heartbeat.signal.aborted).toBe(false);

    await clock.advance(8_000);
    await stopped;
    expect(calls).toEqual(["worker stopping", "worker killed", "removed n1"]);
    expect(lines.some((l) => l.startsWith("stop_grace (8s) passed: killing 1 running action;"))).toBe(true);
    expect(heartbeat.signal.aborted).toBe(true);
    expect(lines.at(-1)).toBe("edge node stopped");
  });

  it("kills nothing when the task ends within the grace", async () => {
    const { clock, calls, lines, worker, stopper } = setUp();
    const stopped = stopper.stop({ graceMs: 8_000 });
    await settle();
    worker.finish();
    await stopped;
    await clock.advance(10_000);
    expect(calls).toEqual(["worker stopping", "removed n1"]);
    expect(lines.some((l) => l.startsWith("stop_grace"))).toBe(false);
  });

  it("a second, harder stop kills at once and resolves with the first", async () => {
    const { calls, stopper } = setUp();
    const first = stopper.stop();
    await settle();
    expect(calls).toEqual(["worker stopping"]);
    const second = stopper.stop({ abortRunning: true });
    await Promise.all([first, second]);
    expect(calls).toEqual(["worker stopping", "worker killed", "removed n1"]);
  });
});

describe("startHeartbeat", () => {
  it("beats every interval with the node's row until stopped", async () => {
    const { clock, beats, heartbeat } = setUp();
    await settle();
    expect(beats).toHaveLength(1);
    expect(beats[0]).toMatchObject({ session, labels: ["gpu"], capacity: 2, roomIds: ["!r"] });
    await clock.advance(10_000);
    expect(beats).toHaveLength(3);
    await heartbeat.stop();
    await clock.advance(10_000);
    expect(beats).toHaveLength(3);
  });
});
