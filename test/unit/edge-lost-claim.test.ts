/**
 * A claim whose answer is lost (docs/operations.md, "Edge nodes"): an edge node's worker, its
 * EdgeStore and a core's HTTP API over a real SQLite store, with a TCP proxy between edge and core
 * that cuts the connection when the answer of the first claim and of the first finish-and-claim
 * comes back, after the core committed them. The edge adopts what its session holds: every task
 * runs once, on its first attempt, long before a task lease (10 minutes here) could expire.
 */
import { createHash } from "node:crypto";
import { connect, createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { systemClock } from "../../src/adapters/clock/system-clock.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import { EdgeStore } from "../../src/adapters/edge/edge-store.js";
import { startEdgeNode } from "../../src/app/edge-node.js";
import type { EdgeNode } from "../../src/app/edge-node.js";
import type { ActionDefinition, ExecRequest, ExecResult, Executor } from "../../src/ports/executor.js";
import type { LeaderFence, Store } from "../../src/ports/store.js";
import { startEdgeCore } from "../support/edge-core.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../support/store-fixtures.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const EDGE_TOKEN = "edge-token-0123456789abcdef-lost1";
const ROOM = "local";
const TASK_LEASE_MS = 600_000;

/**
 * A TCP proxy to `targetPort` that, for each path in `cut`, lets the first request to it reach the
 * core and destroys the connection as that request's answer starts to come back: the core has
 * committed, the edge never hears it. Keep-alive requests on one connection come one at a time, so
 * the first answer after the request is its own.
 */
async function cuttingProxy(
  targetPort: number,
  cut: string[],
  /** Paths answered with a plain 404, as a core of a release without the route answers. */
  unknown: string[] = [],
): Promise<{ port: number; cutPaths: string[]; close(): Promise<void> }> {
  const pending = new Set(cut);
  const cutPaths: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(targetPort, "127.0.0.1");
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    let cutting: string | null = null;
    inbound.on("data", (chunk: Buffer) => {
      const path = /^POST (\S+) HTTP/.exec(chunk.toString("latin1"))?.[1];
      if (path !== undefined && unknown.includes(path)) {
        const body = JSON.stringify({
          message: `Route POST:${path} not found`,
          error: "Not Found",
          statusCode: 404,
        });
        inbound.end(
          `HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        );
        outbound.destroy();
        return;
      }
      if (path !== undefined && pending.delete(path)) cutting = path;
      outbound.write(chunk);
    });
    outbound.on("data", (chunk: Buffer) => {
      if (cutting !== null) {
        cutPaths.push(cutting);
        inbound.destroy();
        outbound.destroy();
        return;
      }
      inbound.write(chunk);
    });
    inbound.on("end", () => outbound.end());
    outbound.on("end", () => inbound.end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    port,
    cutPaths,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** An executor that records each attempt it starts (run/task/attempt) and succeeds at once. */
class RecordingExecutor implements Executor {
  readonly ran: string[] = [];
  run(request: ExecRequest): Promise<ExecResult> {
    this.ran.push(`${request.env.DAGBOT_TASK_ID}#${request.env.DAGBOT_ATTEMPT}`);
    return Promise.resolve({
      outcome: "succeeded",
      exitCode: 0,
      signal: null,
      output: "ok\n",
      outputTruncated: false,
      totalOutputBytes: 3,
      durationMs: 1,
    });
  }
}

const echo: ActionDefinition = {
  name: "echo",
  argv: ["true"],
  args: {},
  cwd: null,
  env: {},
  timeoutMs: 60_000,
  outputLimitBytes: 65_536,
  killGraceMs: 1_000,
};

describe("an edge's claim whose answer is lost", () => {
  const db = sqliteTestDb("edge-lost-claim");
  let store: Store;
  let api: HttpApi;
  let fence: LeaderFence;
  let failed = true;

  beforeAll(async () => {
    store = await db.open();
    fence = await becomeLeader(store, ROOM);
    const config = inProcessHttpConfig("read-token-0123456789abcdef-unused");
    config.tokens = [{ name: "edge1", sha256: sha(EDGE_TOKEN), level: "edge", node: "edge-1" }];
    api = await startEdgeCore(store, config, ROOM);
  });
  afterAll(async () => {
    await api?.close();
    await store?.close();
    db.cleanup(failed);
  });

  /** A running run of `ids` in the room. */
  const running = (dagId: string, ids: readonly string[]) =>
    publishRunning(
      store,
      fence,
      dag(
        dagId,
        ids.map((id) => task(id)),
      ),
    );
  /** The edge's store client, talking to the core through `proxy`. */
  const edgeThrough = (proxy: { port: number }): EdgeStore =>
    new EdgeStore({ cores: [`http://127.0.0.1:${proxy.port}`], token: EDGE_TOKEN, logger: silentLogger() });

  it("answers the claim with the tasks it committed, and never hands one out twice", async () => {
    const run = await running("lost-direct", ["d1", "d2", "d3", "d4", "d5"]);
    const proxy = await cuttingProxy(api.port, ["/v1/edge/claim"]);
    const edge = edgeThrough(proxy);
    const me = session("edge-1");
    try {
      const first = await edge.claimTasks(offer(me, [ROOM]), 3);
      expect(proxy.cutPaths).toEqual(["/v1/edge/claim"]);
      // The cut claim's three tasks, as the store holds them for this session, with working tokens.
      const held = (await store.listTasks(run.runId)).filter((t) => t.status === "running");
      expect(first.claimed.map((c) => c.task.taskId).sort()).toEqual(held.map((t) => t.taskId).sort());
      expect(first.claimed).toHaveLength(3);
      // The next claim claims the other two, and hands none of the first three out again.
      const second = await edge.claimTasks(offer(me, [ROOM]), 5);
      const all = [...first.claimed, ...second.claimed].map((c) => c.task.taskId).sort();
      expect(all).toEqual(["d1", "d2", "d3", "d4", "d5"]);
      for (const c of [...first.claimed, ...second.claimed])
        expect(await edge.finishTask(c.token, { ...ok, output: "" })).toEqual({ status: "succeeded" });
      expect((await edge.claimTasks(offer(me, [ROOM]), 5)).claimed).toEqual([]);
    } finally {
      edge.close();
      await proxy.close();
    }
  });

  it("from a core without /v1/edge/held (0.5.0), leaves the lost claim's tasks to their lease and goes on claiming", async () => {
    const run = await running("lost-old-core", ["o1", "o2", "o3", "o4"]);
    const proxy = await cuttingProxy(api.port, ["/v1/edge/claim"], ["/v1/edge/held"]);
    const edge = edgeThrough(proxy);
    const me = session("edge-1");
    try {
      // The first claim committed two tasks and its answer was lost; the core cannot say which.
      expect((await edge.claimTasks(offer(me, [ROOM]), 2)).claimed).toEqual([]);
      expect(proxy.cutPaths).toEqual(["/v1/edge/claim"]);
      const lost = (await store.listTasks(run.runId))
        .filter((t) => t.status === "running")
        .map((t) => t.taskId);
      expect(lost).toHaveLength(2);
      // The edge is not stuck: the next claim takes the other two, never the lost ones.
      const next = await edge.claimTasks(offer(me, [ROOM]), 4);
      expect(next.claimed.map((c) => c.task.taskId).sort()).toEqual(
        ["o1", "o2", "o3", "o4"].filter((id) => !lost.includes(id)),
      );
      for (const c of next.claimed)
        expect(await edge.finishTask(c.token, { ...ok, output: "" })).toEqual({ status: "succeeded" });
      expect((await edge.claimTasks(offer(me, [ROOM]), 4)).claimed).toEqual([]);
    } finally {
      edge.close();
      await proxy.close();
    }
  });

  it("is adopted: every task runs exactly once, on its first attempt, long before its lease ends", async () => {
    const ids = ["t1", "t2", "t3", "t4"];
    const run = await running("lost-claim", ids);
    const proxy = await cuttingProxy(api.port, ["/v1/edge/claim", "/v1/edge/finish-and-claim"]);
    const executor = new RecordingExecutor();
    const edgeStore = edgeThrough(proxy);
    let node: EdgeNode | null = null;
    try {
      node = startEdgeNode(
        {
          nodeId: "edge-1",
          labels: [],
          // One slot: the first claim leaves tasks behind, so the first finish claims the next in the same call.
          capacity: 1,
          roomIds: [ROOM],
          actions: new Map([["echo", echo]]),
          taskLeaseMs: TASK_LEASE_MS,
          heartbeatEveryMs: 60_000,
          workerPollMs: 200,
          debounceMs: 0,
        },
        { store: edgeStore, executor, clock: systemClock, logger: silentLogger(), bootId: "boot-1" },
      );
      // A lease expiry would take 10 minutes; every task is done long before.
      await expect
        .poll(async () => (await store.listTasks(run.runId)).map((t) => t.status), { timeout: 30_000 })
        .toEqual(ids.map(() => "succeeded"));
      // Both answers were cut after the core committed...
      expect(proxy.cutPaths).toEqual(["/v1/edge/claim", "/v1/edge/finish-and-claim"]);
      // ...and still each task ran once, on its first attempt (a lease expiry would have made a second).
      expect([...executor.ran].sort()).toEqual(ids.map((id) => `${id}#1`));
      for (const t of await store.listTasks(run.runId)) {
        expect(t.attempt, t.taskId).toBe(1);
        expect(t.executor?.nodeId).toBe("edge-1");
      }
      failed = false;
    } finally {
      await node?.stop();
      edgeStore.close();
      await proxy.close();
    }
  });
});
