// A leader must stay the same size however long it leads: abort listeners on its leadership signal
// and live timers are counted after a few renewals and again after hundreds more, over a real
// SQLite file with the real leader loop and short timings. (The leak this guards against added one
// abort listener per renewal: a MaxListenersExceededWarning within seconds of leading.)
import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { LeaseKeeper } from "../../src/app/lease-keeper.js";
import { runLeaderLoop } from "../../src/app/leader.js";
import type { Store } from "../../src/ports/store.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { waitFor } from "../support/store-wait.js";

const ROOM = "room";
let db: SqliteTestDb | null = null;
const open: Store[] = [];

afterEach(async (ctx) => {
  for (const s of open.splice(0)) await s.close();
  db?.cleanup(ctx.task.result?.state === "fail");
  db = null;
});

/** Live timers of this process (setTimeout/setInterval not yet fired or cleared). */
const liveTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("a leader's footprint", () => {
  it("does not grow abort listeners or timers with lease renewals", async () => {
    db = sqliteTestDb("engine-leaks");
    const s = await db.open();
    open.push(s);
    let renewals = 0;
    let leadSignal: AbortSignal | null = null;
    const keeper = new LeaseKeeper({
      store: {
        ...bound(s),
        renewLease: async (fence, ttl) => {
          const r = await s.renewLease(fence, ttl);
          renewals += 1;
          return r;
        },
      },
      clock: systemClock,
      logger: silentLogger(),
      session: { nodeId: "a", bootId: "1" },
      roomId: ROOM,
      // Renewals every 2 ms: hundreds in a second or two, each one a full trip through the keeper.
      timings: { ttlMs: 2_000, renewEveryMs: 2, acquireEveryMs: 50 },
      lead: (fence, signal, deposed) => {
        leadSignal = signal;
        return runLeaderLoop(
          {
            store: s,
            clock: systemClock,
            logger: silentLogger(),
            timings: { debounceMs: 1, safetyTickMs: 5 },
            processInbox: null,
          },
          fence,
          signal,
          deposed,
        );
      },
    });
    keeper.start();
    try {
      const at = async (n: number) => {
        await waitFor(
          `${n} renewals`,
          () => renewals,
          (r) => r >= n,
          { timeoutMs: 30_000, intervalMs: 5 },
        );
        expect(keeper.fence).not.toBeNull();
        return { listeners: getEventListeners(leadSignal!, "abort").length, timers: liveTimers() };
      };
      const early = await at(20);
      const late = await at(420);
      // A listener or timer per renewal would add ~400; one in flight at the moment of a reading may
      // differ by a couple.
      expect(late.listeners - early.listeners).toBeLessThanOrEqual(2);
      expect(late.timers - early.timers).toBeLessThanOrEqual(2);
    } finally {
      await keeper.stop();
    }
    expect(getEventListeners(leadSignal!, "abort").length).toBe(0);
  });
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
