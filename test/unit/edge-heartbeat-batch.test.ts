/**
 * A core's edge heartbeats are written in batches (docs/operations.md, "Edge nodes"): many edges
 * beating at once through /v1/edge/heartbeat cost a few store calls, not one each. A real SQLite
 * store behind an HTTP API in this process; the store's heartbeats() calls are counted.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { HttpApi } from "../../src/adapters/http/server.js";
import { HEARTBEAT_BATCH_MAX } from "../../src/app/heartbeat-batcher.js";
import type { Clock } from "../../src/ports/clock.js";
import type { NodeHeartbeat, Store } from "../../src/ports/store.js";
import { edgeCoreTestbed, startEdgeCore } from "../support/edge-core.js";
import { inProcessHttpConfig } from "../support/http-client.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const ROOM = "local";
const EDGES = 200;
const tokenOf = (i: number): string => `edge-token-0123456789abcdef-edge${i}`;

/** The store, with its heartbeat writes counted. */
function counted(store: Store): { store: Store; batches: number[]; single: () => number } {
  const batches: number[] = [];
  let single = 0;
  const wrapped = new Proxy(store, {
    get(target, key) {
      if (key === "heartbeats")
        return async (beats: readonly NodeHeartbeat[]) => {
          batches.push(beats.length);
          return target.heartbeats(beats);
        };
      if (key === "heartbeat")
        return async (beat: NodeHeartbeat) => {
          single += 1;
          return target.heartbeat(beat);
        };
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: wrapped, batches, single: () => single };
}

/**
 * A window no time ends: a batch goes when it is full (or at close). With it the count does not
 * depend on how fast this machine sends the requests.
 */
const endlessWindow: Clock = {
  monotonicMs: () => 0,
  wallMs: () => 0,
  sleep: (_ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted === true) resolve();
      else signal?.addEventListener("abort", () => resolve(), { once: true });
    }),
};

describe("edge heartbeats through a core, counted", () => {
  let api: HttpApi | undefined;
  let store: Store | undefined;
  const bed = edgeCoreTestbed("edge-heartbeat-batch");

  /** A core over a fresh SQLite store (its file kept when the test failed). */
  const start = async (clock?: Clock) => {
    store = await bed.open();
    const count = counted(store);
    const config = { ...inProcessHttpConfig("read-token-0123456789abcdef-reader"), openMetrics: false };
    config.maxConnections = EDGES + 16;
    config.tokens = Array.from({ length: EDGES }, (_, i) => ({
      name: `edge${i}`,
      sha256: sha(tokenOf(i)),
      level: "edge" as const,
      node: `edge-${i}`,
    }));
    api = bed.serve(await startEdgeCore(count.store, config, ROOM, clock));
    return { base: `http://127.0.0.1:${api.port}`, ...count };
  };

  const beatAll = (base: string): Promise<number[]> =>
    Promise.all(
      Array.from({ length: EDGES }, async (_, i) => {
        const res = await fetch(`${base}/v1/edge/heartbeat`, {
          method: "POST",
          headers: { authorization: `Bearer ${tokenOf(i)}`, "content-type": "application/json" },
          body: JSON.stringify({
            beat: {
              session: { nodeId: `edge-${i}`, bootId: "b1" },
              labels: ["edge"],
              capacity: 2,
              actions: ["echo"],
              roomIds: [ROOM],
            },
          }),
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );

  const edgeRows = async (): Promise<number> =>
    (await store!.listNodes()).filter((n) => n.session.nodeId.startsWith("edge-")).length;

  it(`${EDGES} edges beating at once are answered after one store call when the batch fills`, async () => {
    expect(EDGES).toBe(HEARTBEAT_BATCH_MAX);
    const { base, batches, single } = await start(endlessWindow);
    const statuses = await beatAll(base);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(batches).toEqual([EDGES]);
    expect(single()).toBe(0);
    expect(await edgeRows()).toBe(EDGES);
  });

  it(`${EDGES} edges beating at once, on the real clock, cost far fewer than ${EDGES} store calls`, async () => {
    const { base, batches, single } = await start();
    const statuses = await beatAll(base);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(EDGES);
    // Each call takes the beats of a 50 ms window (or those that came while the last one
    // committed): a handful on a quiet machine (3 to 6 seen), one per request before batching. The
    // bound leaves room for a machine busy enough to spread the requests over seconds.
    expect(batches.length, `store calls of ${batches.join(", ")} beats`).toBeLessThan(EDGES / 2);
    expect(single()).toBe(0);
    expect(await edgeRows()).toBe(EDGES);
  });
});
