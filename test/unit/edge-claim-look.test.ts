/**
 * An edge's claim that nothing fits costs a share of one read of the queue, not a claim transaction
 * (docs/operations.md, "Edge nodes"; src/app/claim-gate.ts). A real SQLite store, its claim and
 * queue-read calls counted; through the core's HTTP API for what an edge sees.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { EdgeStore } from "../../src/adapters/edge/edge-store.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import { FOUND_WORK_FOR_MS, QueueLook } from "../../src/app/claim-gate.js";
import type { Store } from "../../src/ports/store.js";
import { edgeCoreTestbed, startEdgeCore } from "../support/edge-core.js";
import { FakeClock } from "../support/fake-clock.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import {
  becomeLeader,
  dag,
  failed as failedResult,
  offer,
  publishRunning,
  session,
  task,
} from "../support/store-fixtures.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const ROOM = "local";
const CLAIMS = 40;
const tokenOf = (i: number): string => `edge-token-0123456789abcdef-edge${i}`;

/** The store, with its claims (claimTasks, claimTask, finishAndClaim) and queue reads counted. */
function counted(store: Store): { store: Store; claims: () => number; reads: () => number } {
  let claims = 0;
  let reads = 0;
  const wrapped = new Proxy(store, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      if (key === "claimTasks" || key === "claimTask" || key === "finishAndClaim")
        return (...a: unknown[]) => {
          claims += 1;
          return fn(...a);
        };
      if (key === "queuedShapes")
        return (...a: unknown[]) => {
          reads += 1;
          return fn(...a);
        };
      return fn;
    },
  });
  return { store: wrapped, claims: () => claims, reads: () => reads };
}

describe("an edge claim that nothing fits, over a real store", () => {
  let store: Store | undefined;
  let api: HttpApi | undefined;
  const bed = edgeCoreTestbed("edge-claim-look");

  const open = async () => {
    store = await bed.open();
    return { fence: await becomeLeader(store, ROOM), ...counted(store) };
  };

  it(`${CLAIMS} claims at once cost at most two queue reads and no claim; a fitting task goes on to the claim`, async () => {
    const { fence, store: s, claims, reads } = await open();
    const clock = new FakeClock();
    const look = new QueueLook(s, [ROOM], clock, 0);
    // A task that fits none of the offers: another action.
    await publishRunning(store!, fence, dag("other", [task("x", { action: "deploy" })]));
    const answers = await Promise.all(
      Array.from({ length: CLAIMS }, (_, i) => look.emptyClaim(offer(session(`edge-${i}`), [ROOM]))),
    );
    expect(answers.every((a) => a !== null && a.claimed.length === 0)).toBe(true);
    expect(reads()).toBeLessThanOrEqual(2);
    expect(claims()).toBe(0);
    // A fitting task queued now: the next look sends its claim on.
    await publishRunning(store!, fence, dag("mine", [task("y", { retries: 1, retryBackoffMs: 60_000 })]));
    expect(await look.emptyClaim(offer(session("edge-0"), [ROOM]))).toBeNull();
    // Its first attempt failed: it waits out its backoff, and once the read that found it ready is
    // too old to send claims on, the edge is told when to ask again.
    const w = session("edge-1");
    const c = (await s.claimTasks(offer(w, [ROOM]), 1)).claimed[0]!;
    expect(await s.finishTask(c.token, failedResult)).toEqual({ status: "queued" });
    expect(await look.emptyClaim(offer(w, [ROOM]))).toBeNull();
    await clock.advance(FOUND_WORK_FOR_MS);
    const waiting = await look.emptyClaim(offer(w, [ROOM]));
    expect(waiting?.claimed).toEqual([]);
    expect(waiting?.nextReadyInMs).toBeGreaterThan(50_000);
    expect(waiting?.nextReadyInMs).toBeLessThanOrEqual(60_000);
    expect(claims()).toBe(1);
  });

  it("through the core: empty claims take no claim transaction, and a queued task is claimed", async () => {
    const { fence, store: s, claims, reads } = await open();
    const config = { ...inProcessHttpConfig("read-token-0123456789abcdef-reader"), openMetrics: false };
    config.maxConnections = CLAIMS + 16;
    config.tokens = Array.from({ length: CLAIMS }, (_, i) => ({
      name: `edge${i}`,
      sha256: sha(tokenOf(i)),
      level: "edge" as const,
      node: `edge-${i}`,
    }));
    api = bed.serve(await startEdgeCore(s, config, ROOM));
    const base = `http://127.0.0.1:${api.port}`;
    const edges = Array.from(
      { length: CLAIMS },
      (_, i) => new EdgeStore({ cores: [base], token: tokenOf(i), logger: silentLogger() }),
    );
    const empty = await Promise.all(
      edges.map((e, i) => e.claimTasks(offer(session(`edge-${i}`), [ROOM]), 1)),
    );
    expect(empty.every((b) => b.claimed.length === 0 && !b.more)).toBe(true);
    expect(claims()).toBe(0);
    expect(reads()).toBeGreaterThan(0);
    const run = await publishRunning(store!, fence, dag("work", [task("a")]));
    const batch = await edges[3]!.claimTasks(offer(session("edge-3"), [ROOM]), 1);
    expect(batch.claimed.map((c) => [c.task.runId, c.task.taskId])).toEqual([[run.runId, "a"]]);
    expect(claims()).toBe(1);
    // The core's /metrics tells how it answered them.
    const answered = Object.fromEntries(
      (await api.metrics.edgeClaims.get()).values.map((v) => [v.labels.answer, v.value]),
    );
    expect(answered).toEqual({ looked: CLAIMS, store: 1 });
  });
});
