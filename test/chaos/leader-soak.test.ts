// Soak: one leader renews its room lease many times with short timings (10,000 renewals with
// CHAOS_LONG=1, 200 in the short version inside npm test) while runs go through it (published, scheduled,
// claimed by a worker running a real `true` process, finished, derived), over a real SQLite file.
// Prints RSS, heap, abort listeners on the leadership signal and live timers at the start and the
// end. Listener counts must stay flat (the leak this guards against added one per renewal);
// memory figures are printed, not asserted: the heap of a busy process moves with the GC.
import { getEventListeners } from "node:events";
import { afterAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { createProcessExecutor } from "../../src/adapters/exec/process-executor.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { LeaseKeeper } from "../../src/app/lease-keeper.js";
import { runLeaderLoop } from "../../src/app/leader.js";
import { Worker } from "../../src/app/worker.js";
import type { ActionDefinition } from "../../src/ports/executor.js";
import type { Store } from "../../src/ports/store.js";
import { CHAOS_LONG } from "../support/chaos-settings.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { dag, runInput, task } from "../support/store-fixtures.js";
import { waitFor } from "../support/store-wait.js";

const ROOM = "soak";
const RENEWALS = CHAOS_LONG ? 10_000 : 200;
const WARM_UP = 100;

const trueAction: ActionDefinition = {
  name: "true",
  argv: ["true"],
  args: {},
  cwd: null,
  env: {},
  timeoutMs: 30_000,
  outputLimitBytes: 1024,
  killGraceMs: 200,
};

let db: SqliteTestDb | null = null;
let failed = false;
afterAll(() => db?.cleanup(failed));

interface Footprint {
  renewals: number;
  rssMB: number;
  heapMB: number;
  leadListeners: number;
  timers: number;
  runsDone: number;
}

describe("leader soak", () => {
  it(`a leader renewing ${RENEWALS} times while runs go through keeps its listener count flat`, async () => {
    db = sqliteTestDb("leader-soak");
    const store: Store = await db.open();
    const logger = silentLogger();
    let renewals = 0;
    let leadSignal: AbortSignal | null = null;
    const keeper = new LeaseKeeper({
      store: {
        ...bound(store),
        renewLease: async (fence, ttl) => {
          const r = await store.renewLease(fence, ttl);
          renewals += 1;
          return r;
        },
      },
      clock: systemClock,
      logger,
      session: { nodeId: "leader", bootId: "1" },
      roomId: ROOM,
      timings: { ttlMs: 3_000, renewEveryMs: 2, acquireEveryMs: 50 },
      lead: (fence, signal, deposed) => {
        leadSignal = signal;
        return runLeaderLoop(
          {
            store,
            clock: systemClock,
            logger,
            timings: { debounceMs: 2, safetyTickMs: 50 },
            processInbox: null,
            retention: {
              finishedMs: 60_000,
              forgetNodesAfterMs: 60_000,
              forgetKeysAfterMs: 60_000,
              everyMs: 200,
            },
          },
          fence,
          signal,
          deposed,
        );
      },
    });
    const worker = new Worker(
      {
        session: { nodeId: "worker", bootId: "1" },
        roomIds: [ROOM],
        labels: [],
        capacity: 2,
        actions: new Map([["true", trueAction]]),
        taskLeaseMs: 3_000,
        pollMs: 100,
        debounceMs: 2,
      },
      { store, executor: createProcessExecutor(), clock: systemClock, logger },
    );
    keeper.start();
    worker.start();

    let runsDone = 0;
    let published = 0;
    const footprint = async (): Promise<Footprint> => {
      const m = process.memoryUsage();
      return {
        renewals,
        rssMB: Math.round(m.rss / 1024 / 1024),
        heapMB: Math.round(m.heapUsed / 1024 / 1024),
        leadListeners: leadSignal === null ? -1 : getEventListeners(leadSignal, "abort").length,
        timers: process.getActiveResourcesInfo().filter((r) => r === "Timeout").length,
        runsDone,
      };
    };
    try {
      // Runs keep going through while it renews: each a two-task DAG of `true`, the next published
      // when the previous one ended.
      const traffic = (async () => {
        while (renewals < RENEWALS) {
          const fence = keeper.fence;
          if (fence === null) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          const d = dag(`run-${++published}`, [
            task("a", { action: "true" }),
            task("b", { action: "true", needs: ["a"] }),
          ]);
          const created = await store.createRun({ fence }, runInput(ROOM, d));
          if (created.kind !== "created") throw new Error(created.kind);
          await waitFor(
            `run ${d.id} done`,
            () => store.getRunById(created.run.runId),
            (r) => r?.status === "succeeded",
            { timeoutMs: 30_000, intervalMs: 10 },
          );
          runsDone += 1;
        }
      })();

      await waitFor(
        "warm-up renewals",
        () => renewals,
        (n) => n >= WARM_UP,
        { timeoutMs: 60_000, intervalMs: 10 },
      );
      const start = await footprint();
      await waitFor(
        "renewals",
        () => renewals,
        (n) => n >= RENEWALS,
        {
          timeoutMs: CHAOS_LONG ? 600_000 : 120_000,
          intervalMs: 50,
        },
      );
      await traffic;
      const end = await footprint();
      console.log(`[leader soak] start ${JSON.stringify(start)}`);
      console.log(`[leader soak] end   ${JSON.stringify(end)}`);
      expect(keeper.fence).not.toBeNull();
      expect(end.runsDone).toBeGreaterThan(0);
      // One leadership throughout, and its listeners flat: a listener per renewal would add thousands.
      expect(end.leadListeners - start.leadListeners).toBeLessThanOrEqual(2);
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      await worker.stop({ abortRunning: true });
      await keeper.stop();
      await store.close();
    }
  }, 900_000);
});

/** The store's methods bound to it, so one can be wrapped. */
function bound(s: Store): Store {
  const out: Record<string, unknown> = { kind: s.kind };
  for (const key of Object.keys(s) as Array<keyof Store>) {
    const v = s[key];
    out[key] = typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(s) : v;
  }
  return out as unknown as Store;
}
