// LeaseKeeper on a fake clock and an in-memory lease store: expiry, deposition and release, in no real time.
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import type { LeadEnd, LeaseTimings } from "../../src/app/lease-keeper.js";
import { LeaseKeeper } from "../../src/app/lease-keeper.js";
import type { LeaderFence } from "../../src/ports/store.js";
import { FakeClock, settle } from "../support/fake-clock.js";
import { FakeLeaseStore } from "../support/fake-lease-store.js";

const ROOM = "!room:test";
const TIMINGS: LeaseTimings = { ttlMs: 10_000, renewEveryMs: 3_000, acquireEveryMs: 1_000 };

interface Harness {
  clock: FakeClock;
  store: FakeLeaseStore;
  keeper: LeaseKeeper;
  changes: Array<{ term: number | null; end: LeadEnd | undefined; at: number }>;
  /** The leader work's signal, and its deposed() callback, per term. */
  work: Array<{ signal: AbortSignal; deposed: () => void }>;
}

const running: LeaseKeeper[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((k) => k.stop()));
});

async function leading(): Promise<Harness> {
  const clock = new FakeClock();
  const store = new FakeLeaseStore(clock, ROOM);
  const changes: Harness["changes"] = [];
  const work: Harness["work"] = [];
  const keeper = new LeaseKeeper({
    store,
    clock,
    logger: silentLogger(),
    session: { nodeId: "n1", bootId: "b1" },
    roomId: ROOM,
    timings: TIMINGS,
    lead: (_fence: LeaderFence, signal, deposed) => {
      work.push({ signal, deposed });
      return new Promise<void>((resolve) =>
        signal.addEventListener("abort", () => resolve(), { once: true }),
      );
    },
    onChange: (fence, end) => changes.push({ term: fence?.term ?? null, end, at: clock.monotonicMs() }),
  });
  running.push(keeper);
  keeper.start();
  await settle();
  return { clock, store, keeper, changes, work };
}

describe("LeaseKeeper", () => {
  it("leads at once and keeps leading across many ttls while renewals are granted", async () => {
    const h = await leading();
    expect(h.keeper.fence?.term).toBe(1);
    await h.clock.advance(10 * TIMINGS.ttlMs);
    expect(h.keeper.fence?.term).toBe(1);
    expect(h.work[0]?.signal.aborted).toBe(false);
    expect(h.store.calls.filter((c) => c === "renew:grant")).toHaveLength(33);
  });

  it("stops leading exactly ttl after the last granted renewal's send when renewals hang", async () => {
    const h = await leading();
    await h.clock.advance(TIMINGS.renewEveryMs); // granted, sent at 4 s: trusted until 14 s
    h.store.renewals = "hang";
    await h.clock.advance(TIMINGS.ttlMs - 1);
    expect(h.clock.monotonicMs()).toBe(13_999);
    expect(h.keeper.fence?.term).toBe(1);
    expect(h.work[0]?.signal.aborted).toBe(false);
    await h.clock.advance(1);
    expect(h.work[0]?.signal.aborted).toBe(true);
    expect(h.changes[1]).toEqual({ term: null, end: "expired", at: 14_000 });
  });

  it("retries failed renewals sooner, then gives leadership up at expiry whatever the store says later", async () => {
    const h = await leading();
    h.store.renewals = "fail";
    await h.clock.advance(TIMINGS.ttlMs);
    expect(h.changes[1]).toEqual({ term: null, end: "expired", at: 11_000 });
    // At 4 s, then 400, 800, 1600 and 3000 ms later (9.8 s); the next would come after the ttl.
    expect(h.store.calls.filter((c) => c === "renew:fail")).toHaveLength(5);
  });

  it("takes the lease again, with the next term, once its expired lease is free in the store", async () => {
    const h = await leading();
    h.store.renewals = "hang";
    await h.clock.advance(TIMINGS.ttlMs);
    expect(h.changes.map((c) => c.term)).toEqual([1, null, 2]);
    expect(h.keeper.fence?.term).toBe(2);
    expect(h.work).toHaveLength(2);
    expect(h.work[1]?.signal.aborted).toBe(false);
  });

  it("is deposed at the first renewal the store refuses, before its term ends", async () => {
    const h = await leading();
    h.store.renewals = "conflict";
    await h.clock.advance(TIMINGS.renewEveryMs);
    expect(h.keeper.fence).toBeNull();
    expect(h.work[0]?.signal.aborted).toBe(true);
    expect(h.changes.at(-1)).toEqual({ term: null, end: "deposed", at: 1_000 + TIMINGS.renewEveryMs });
  });

  it("is deposed at once when the leader work reports a rejected fenced write", async () => {
    const h = await leading();
    await h.clock.advance(500);
    h.work[0]?.deposed();
    await settle();
    expect(h.keeper.fence).toBeNull();
    expect(h.changes.at(-1)).toEqual({ term: null, end: "deposed", at: 1_500 });
  });

  it("a graceful stop ends the work, then releases the lease so a follower takes over at once", async () => {
    const h = await leading();
    running.splice(0);
    await h.keeper.stop();
    expect(h.work[0]?.signal.aborted).toBe(true);
    expect(h.store.calls.at(-1)).toBe("release");
    expect(h.changes.at(-1)).toEqual({ term: null, end: "stopping", at: 1_000 });
    expect((await h.store.getLease(ROOM))?.holder).toBeNull();
  });
});
