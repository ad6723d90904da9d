// What the engine's loops report to the HTTP API's metrics (EngineObserver -> NodeMetrics), over a
// real SQLite file: a lease renewal rejected because another node took the lease, and the loops'
// store errors once the node's store is closed under it. Read back as /metrics text.
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import { createProcessExecutor } from "../../src/adapters/exec/process-executor.js";
import { NodeMetrics } from "../../src/adapters/http/metrics.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { DEFAULT_LEADER_TIMINGS } from "../../src/app/leader.js";
import { LeaseKeeper } from "../../src/app/lease-keeper.js";
import { whenAborted } from "../../src/app/wake.js";
import type { EngineNode, EngineSettings } from "../../src/app/node.js";
import { startEngineNode } from "../../src/app/node.js";
import { runOutboxLoop } from "../../src/app/outbox-loop.js";
import { engineMetricsRelay } from "../../src/composition/http-api.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import type { Store } from "../../src/ports/store.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { waitFor } from "../support/store-wait.js";

const ROOM = "room";
const logger = silentLogger();
let db: SqliteTestDb | null = null;
const open: Store[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async (ctx) => {
  for (const c of cleanups.splice(0)) await c();
  for (const s of open.splice(0)) await s.close().catch(() => {});
  db?.cleanup(ctx.task.result?.state === "fail");
  db = null;
});

async function store(clockOffsetMs = 0): Promise<Store> {
  db ??= sqliteTestDb("engine-metrics");
  const s = await db.open(clockOffsetMs === 0 ? {} : { clock: () => Date.now() + clockOffsetMs });
  open.push(s);
  return s;
}

function nodeMetrics(): NodeMetrics {
  return new NodeMetrics("m/1", {
    rooms: [ROOM],
    queueDepth: () => Promise.resolve(0),
    leaderTerm: () => null,
    outboxPending: () => Promise.resolve(null),
    storeErrors: () => 0,
    streamClients: () => 0,
    streamDrops: () => 0,
  });
}

/** The value of one sample of the /metrics text, 0 when the series is absent. */
async function sample(m: NodeMetrics, series: string): Promise<number> {
  const text = await m.registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

function startNode(s: Store, m: NodeMetrics, work: boolean): EngineNode {
  const settings: EngineSettings = {
    nodeId: "m",
    labels: [],
    capacity: 1,
    roomIds: [ROOM],
    actions: new Map(),
    lease: { ttlMs: 800, renewEveryMs: 150, acquireEveryMs: 150 },
    leader: { ...DEFAULT_LEADER_TIMINGS, safetyTickMs: 100, idleTickMs: 100 },
    taskLeaseMs: 800,
    heartbeatEveryMs: 150,
    workerPollMs: 150,
    work,
  };
  const node = startEngineNode(settings, {
    store: s,
    executor: createProcessExecutor(),
    clock: systemClock,
    logger,
    processInbox: null,
    bootId: "1",
    observer: m.observer(),
  });
  cleanups.push(() => node.stop());
  return node;
}

describe("lease renew failures", () => {
  it("counts a renewal rejected because another node took the lease, as a conflict and not as a store error", async () => {
    const s = await store();
    const m = nodeMetrics();
    const observer = m.observer();
    const ends: string[] = [];
    // A keeper whose leader work writes nothing, so the renewal is what meets the new holder.
    const k = new LeaseKeeper({
      store: s,
      clock: systemClock,
      logger,
      session: { nodeId: "m", bootId: "1" },
      roomId: ROOM,
      timings: { ttlMs: 800, renewEveryMs: 150, acquireEveryMs: 150 },
      lead: (_fence, signal) => whenAborted(signal),
      onChange: (_fence, end) => {
        if (end !== undefined) ends.push(end);
      },
      onRenewFailure: (why) => observer.leaseRenewFailed(ROOM, why),
      onStoreError: () => observer.storeError("lease"),
    });
    cleanups.push(() => k.stop());
    k.start();
    const fence = await waitFor(
      "leading",
      () => k.fence,
      (f) => f !== null,
    );
    const conflicts = `dagbot_lease_renew_failures_total{room="${ROOM}",reason="conflict"}`;
    expect(await sample(m, conflicts)).toBe(0);
    // Another node whose clock is a minute ahead sees the lease expired and takes it for a minute.
    const later = await store(60_000);
    const taken = await later.acquireLease(ROOM, { nodeId: "b", bootId: "2" }, 60_000);
    expect(taken.term).toBe(fence!.term + 1);
    await waitFor(
      "the rejected renewal counted",
      () => sample(m, conflicts),
      (n) => n >= 1,
    );
    expect(ends).toEqual(["deposed"]);
    expect(await sample(m, conflicts)).toBe(1);
    expect(await sample(m, `dagbot_lease_renew_failures_total{room="${ROOM}",reason="error"}`)).toBe(0);
    expect(await sample(m, `dagbot_loop_store_errors_total{loop="lease"}`)).toBe(0);
  });
});

describe("loop store errors", () => {
  it("counts failed renewals as errors and each loop's failed store calls, by loop, once the store is closed", async () => {
    const s = await store();
    const m = nodeMetrics();
    const node = startNode(s, m, true);
    await waitFor(
      "leading",
      () => node.leading(ROOM),
      (f) => f !== null,
    );
    for (const loop of ["lease", "leader", "worker", "heartbeat"]) {
      expect(await sample(m, `dagbot_loop_store_errors_total{loop="${loop}"}`)).toBe(0);
    }
    await s.close();
    await waitFor(
      "every loop's store errors counted",
      async () =>
        Promise.all(
          ["lease", "leader", "worker", "heartbeat"].map((loop) =>
            sample(m, `dagbot_loop_store_errors_total{loop="${loop}"}`),
          ),
        ),
      (counts) => counts.every((n) => n >= 1),
      { timeoutMs: 5_000 },
    );
    expect(
      await sample(m, `dagbot_lease_renew_failures_total{room="${ROOM}",reason="error"}`),
    ).toBeGreaterThanOrEqual(1);
    expect(await sample(m, `dagbot_lease_renew_failures_total{room="${ROOM}",reason="conflict"}`)).toBe(0);
  });

  it("counts the outbox loop's failed passes as loop outbox", async () => {
    const s = await store();
    const fence = await s.acquireLease(ROOM, { nodeId: "m", bootId: "1" }, 60_000);
    await s.close();
    const m = nodeMetrics();
    const observer = m.observer();
    const stop = new AbortController();
    const loop = runOutboxLoop(
      {
        store: s,
        transport: {
          sendEvent: () => Promise.reject(new Error("no send expected")),
          findSent: () => Promise.resolve(new Map()),
        } as unknown as Parameters<typeof runOutboxLoop>[0]["transport"],
        clock: systemClock,
        logger,
        onStoreError: () => observer.storeError("outbox"),
      },
      fence,
      stop.signal,
    );
    cleanups.push(async () => {
      stop.abort();
      await loop;
    });
    await waitFor(
      "the outbox loop's failure counted",
      () => sample(m, `dagbot_loop_store_errors_total{loop="outbox"}`),
      (n) => n >= 1,
    );
  });
});

describe("the composition's relay", () => {
  it("keeps what the engine reports before the HTTP API is up and counts it once attached", async () => {
    const m = nodeMetrics();
    const relay = engineMetricsRelay();
    relay.observer.leaseRenewFailed?.(ROOM, "error");
    relay.observer.storeError?.("worker");
    expect(await sample(m, `dagbot_loop_store_errors_total{loop="worker"}`)).toBe(0);
    relay.attach({ metrics: m } as HttpApi);
    relay.observer.storeError?.("worker");
    expect(await sample(m, `dagbot_loop_store_errors_total{loop="worker"}`)).toBe(2);
    expect(await sample(m, `dagbot_lease_renew_failures_total{room="${ROOM}",reason="error"}`)).toBe(1);
  });
});
