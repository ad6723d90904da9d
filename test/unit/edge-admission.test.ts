/**
 * Under load a core sheds claims, never renewals (docs/operations.md, "Edge nodes";
 * src/app/claim-gate.ts): a claim past the wait bound is answered 503 `busy` with a Retry-After
 * before the store is asked, while a renewal is served; the edge's client takes that as "no task
 * now", sends no claim until the wait passed, and then claims again on the same core. A real
 * SQLite store whose claims the test holds.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { answerOf, busyRetryMs, CoreBusyError, EdgeStore } from "../../src/adapters/edge/edge-store.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import { claimWaitBoundFor } from "../../src/app/claim-gate.js";
import type { Clock } from "../../src/ports/clock.js";
import type { NodeOffer, Store } from "../../src/ports/store.js";
import { edgeCoreTestbed, startEdgeCore } from "../support/edge-core.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { becomeLeader, dag, ok, offer, publishRunning, session, task } from "../support/store-fixtures.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const ROOM = "local";
const EDGE_TOKEN = "edge-token-0123456789abcdef-edge1";
/** A pool of one: one claim at a time, four waiting (claimWaitBoundFor). */
const POOL = 1;

/**
 * No claim's wait (2 s) ends by time here: only the bound refuses, whatever this machine's speed.
 * Shorter sleeps (the look's gap between reads, the heartbeats' window) pass as on the real clock.
 */
const endless: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted === true) return resolve();
      const timer = ms < 1_000 ? setTimeout(resolve, ms) : undefined;
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    }),
};

/** The store, its claims held while `hold` is on (each counted as it reaches the store). */
function holding(store: Store): { store: Store; hold: (on: boolean) => void; reached: () => number } {
  let release: (() => void) | null = null;
  let gate: Promise<void> = Promise.resolve();
  let reached = 0;
  const wrapped = new Proxy(store, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      const fn = (value as (...a: unknown[]) => Promise<unknown>).bind(target);
      if (key === "claimTasks")
        return async (...a: unknown[]) => {
          reached += 1;
          await gate;
          return fn(...a);
        };
      return fn;
    },
  });
  return {
    store: wrapped,
    reached: () => reached,
    hold: (on) => {
      if (on && release === null)
        gate = new Promise<void>((resolve) => {
          release = resolve;
        });
      if (!on && release !== null) {
        release();
        release = null;
      }
    },
  };
}

describe("a busy core's claims", () => {
  let store: Store | undefined;
  let api: HttpApi | undefined;
  const bed = edgeCoreTestbed("edge-admission");

  it("past the bound a claim is 503 busy with Retry-After, a renewal is still served, and the edge claims again", async () => {
    store = await bed.open();
    const fence = await becomeLeader(store, ROOM);
    const held = holding(store);
    const config = { ...inProcessHttpConfig("read-token-0123456789abcdef-reader"), openMetrics: false };
    config.tokens = [{ name: "edge1", sha256: sha(EDGE_TOKEN), level: "edge", node: "edge-1" }];
    api = bed.serve(await startEdgeCore(held.store, config, ROOM, endless, POOL));
    const base = `http://127.0.0.1:${api.port}`;
    const me = session("edge-1");
    const o: NodeOffer = offer(me, [ROOM]);
    let now = 0;
    const edge = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger(), now: () => now });
    await publishRunning(store, fence, dag("work", [task("a"), task("b")]));
    const running = (await edge.claimTasks(o, 1)).claimed[0]!;

    // The store's claims are held: one claim in flight, the bound's worth waiting, the rest refused.
    held.hold(true);
    const waitBound = claimWaitBoundFor(POOL);
    const sent = waitBound + 3;
    const statuses: number[] = [];
    const retryAfters: (string | null)[] = [];
    let refusedNow!: () => void;
    const allRefused = new Promise<void>((resolve) => {
      refusedNow = resolve;
    });
    const claims = Array.from({ length: sent }, async () => {
      const res = await fetch(`${base}/v1/edge/claim`, {
        method: "POST",
        headers: { authorization: `Bearer ${EDGE_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ offer: o, max: 1 }),
      });
      const body = (await res.json()) as { code?: string };
      statuses.push(res.status);
      if (res.status === 503) {
        expect(body.code).toBe("busy");
        retryAfters.push(res.headers.get("retry-after"));
        if (retryAfters.length === sent - 1 - waitBound) refusedNow();
      }
      return res.status;
    });
    await allRefused;
    // Retry-After: the time the claims waiting take to pass at this store's pace, 1 to 5 s.
    expect(retryAfters).toHaveLength(2);
    for (const seconds of retryAfters.map(Number)) expect(seconds >= 1 && seconds <= 5).toBe(true);
    expect(held.reached()).toBe(2); // the edge's first claim, and the one in flight now
    // A renewal is served while the claims wait.
    expect((await edge.renewTaskLease(running.token, 30_000)).status).toBe("running");
    // The edge's client: "no task now", ask again in half to one and a half times the Retry-After.
    const busy = await edge.claimTasks(o, 1);
    expect(busy.claimed).toEqual([]);
    expect(busy.nextReadyInMs).toBeGreaterThanOrEqual(500);
    expect(busy.nextReadyInMs).toBeLessThanOrEqual(7500);
    expect(edge.core).toBe(base);
    // Asked again before the wait passed (a leader's wake, say): answered by the edge itself.
    const refusedAtCore = async (): Promise<number> =>
      (await api!.metrics.httpRequests.get()).values
        .filter((v) => v.labels.route === "/v1/edge/claim" && v.labels.status === "503")
        .reduce((sum, v) => sum + v.value, 0);
    const refusals = await refusedAtCore();
    expect((await api!.metrics.edgeClaims.get()).values.find((v) => v.labels.answer === "busy")?.value).toBe(
      refusals,
    );
    now += 400;
    const early = await edge.claimTasks(o, 1);
    expect(early).toEqual({ claimed: [], more: false, nextReadyInMs: busy.nextReadyInMs! - 400 });
    expect(await refusedAtCore()).toBe(refusals);
    now += 10_000;

    held.hold(false);
    const answered = await Promise.all(claims);
    expect(answered.filter((s) => s === 200)).toHaveLength(1 + waitBound);
    expect(statuses.filter((s) => s === 503)).toHaveLength(2);
    expect(await refusedAtCore()).toBe(3);
    // One of the claims held took "b". The edge claims again once the core has room, and gets work.
    expect(await edge.finishTask(running.token, ok)).toEqual({ status: "succeeded" });
    await publishRunning(store, fence, dag("more", [task("c")]));
    const again = await edge.claimTasks(o, 1);
    expect(again.claimed.map((c) => c.task.taskId)).toEqual(["c"]);
  });
});

describe("the edge's client reads a busy answer", () => {
  it("503 busy is CoreBusyError with the Retry-After, not a failing core; other 503s still are", () => {
    const busy = answerOf("claim", 503, { code: "busy" }, "2");
    expect((busy as { error: Error }).error).toBeInstanceOf(CoreBusyError);
    expect(((busy as { error: Error }).error as CoreBusyError).retryAfterMs).toBe(2000);
    expect(
      ((answerOf("claim", 503, { code: "busy" }) as { error: Error }).error as CoreBusyError).retryAfterMs,
    ).toBe(1000);
    expect(answerOf("claim", 503, { code: "store-unavailable" }, "2")).toBeNull();
    expect([0, 0.5, 0.999].map((r) => busyRetryMs(1000, () => r))).toEqual([500, 1000, 1499]);
  });
});
