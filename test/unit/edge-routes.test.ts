/**
 * The /v1/edge/ routes and the edge's client of them (docs/operations.md, "Edge nodes"): a real
 * SQLite store behind an HTTP API in this process, called by EdgeStore as an edge node's worker
 * calls its store. What an edge token may and may not do, and the store's typed errors as the
 * worker sees them through HTTP.
 */
import { createHash } from "node:crypto";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import { allows, maySpeakFor } from "../../src/adapters/http/auth.js";
import { EdgeRefusedError, EdgeStore, answerOf, fitOutput } from "../../src/adapters/edge/edge-store.js";
import { edgeBodyLimitBytes } from "../../src/adapters/http/edge-routes.js";
import { ConflictError, NotFoundError, StoreError } from "../../src/ports/errors.js";
import type { LeaderFence, Store } from "../../src/ports/store.js";
import { startEdgeCore } from "../support/edge-core.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader, dag, offer, ok, publishRunning, session, task } from "../support/store-fixtures.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const EDGE_TOKEN = "edge-token-0123456789abcdef-edge1";
const OTHER_EDGE_TOKEN = "edge-token-0123456789abcdef-edge2";
const READ_TOKEN = "read-token-0123456789abcdef-reader";
const SCOPED_EDGE_TOKEN = "edge-token-0123456789abcdef-edge3";
const ROOM = "local";

describe("answerOf: the core's answers as the worker's port types them", () => {
  it("maps a lost claim to ConflictError, a missing row to NotFoundError, 5xx to the next core", () => {
    const conflict = answerOf("renew", 409, {
      code: "lost-claim",
      operation: "renew task lease",
      expected: { version: 3 },
      found: { version: 4 },
    });
    expect(conflict).not.toBeNull();
    const err = (conflict as { error: Error }).error;
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).operation).toBe("renew task lease");
    expect((err as ConflictError).found).toEqual({ version: 4 });
    const missing = (
      answerOf("finish", 404, { code: "task-not-found", key: { taskId: "a" } }) as { error: Error }
    ).error;
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(answerOf("claim", 503, { code: "store-unavailable" })).toBeNull();
    expect(answerOf("claim", 500, null)).toBeNull();
    const refused = (answerOf("claim", 403, { code: "forbidden", detail: "not yours" }) as { error: Error })
      .error;
    expect(refused).toBeInstanceOf(EdgeRefusedError);
    expect((refused as EdgeRefusedError).status).toBe(403);
    // A 409 that is not about a claim (another route's conflict) is not taken for a lost claim.
    expect((answerOf("claim", 409, { code: "conflict" }) as { error: Error }).error).toBeInstanceOf(
      EdgeRefusedError,
    );
    expect(answerOf("claim", 200, { claimed: [] })).toEqual({ value: { claimed: [] } });
  });
});

describe("edge token levels", () => {
  it("an edge token calls the edge routes only, and only edge tokens call them", () => {
    expect(allows("edge", "edge")).toBe(true);
    expect(allows("edge", "read")).toBe(false);
    expect(allows("edge", "operate")).toBe(false);
    expect(allows("operate", "edge")).toBe(false);
    expect(allows("read", "edge")).toBe(false);
    expect(allows("operate", "read")).toBe(true);
    expect(allows("read", "operate")).toBe(false);
    expect(maySpeakFor({ name: "e", level: "edge", node: "edge-1" }, "edge-1")).toBe(true);
    expect(maySpeakFor({ name: "e", level: "edge", node: "edge-1" }, "edge-2")).toBe(false);
    expect(maySpeakFor({ name: "o", level: "operate" }, "edge-1")).toBe(false);
  });
});

/** A port nothing listens on: a core that is gone. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("the edge routes over a real store", () => {
  const db = sqliteTestDb("edge-routes");
  let store: Store;
  let api: HttpApi;
  let base: string;
  let fence: LeaderFence;
  let failed = true;

  beforeAll(async () => {
    store = await db.open();
    fence = await becomeLeader(store, ROOM);
    const config = { ...inProcessHttpConfig(READ_TOKEN), openMetrics: false };
    config.tokens = [
      { name: "reader", sha256: sha(READ_TOKEN), level: "read" },
      { name: "edge1", sha256: sha(EDGE_TOKEN), level: "edge", node: "edge-1" },
      { name: "edge2", sha256: sha(OTHER_EDGE_TOKEN), level: "edge", node: "edge-2" },
      {
        name: "edge3",
        sha256: sha(SCOPED_EDGE_TOKEN),
        level: "edge",
        node: "edge-3",
        labels: ["cpu"],
        actions: ["echo"],
      },
    ];
    api = await startEdgeCore(store, config, ROOM);
    base = `http://127.0.0.1:${api.port}`;
  });
  afterAll(async () => {
    await api?.close();
    await store?.close();
    db.cleanup(failed);
  });

  const post = async (path: string, token: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it("claims, renews, writes output, reads, finishes and beats through HTTP as through the store", async () => {
    const run = await publishRunning(store, fence, dag("edge-a", [task("a", { outputs: undefined })]));
    const edge = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger() });
    const me = session("edge-1");
    const batch = await edge.claimTasks(offer(me, [ROOM]), 4);
    expect(batch.claimed.map((c) => c.task.taskId)).toEqual(["a"]);
    const claimed = batch.claimed[0]!;
    expect(claimed.token.session).toEqual(me);
    const renewed = await edge.renewTaskLease(claimed.token, 30_000);
    expect(renewed.status).toBe("running");
    await edge.writeTaskOutput(claimed.token, "half way\n", 9);
    expect((await store.getTask(run.runId, "a"))?.output).toBe("half way\n");
    expect((await edge.getTask(run.runId, "a"))?.executor).toEqual(me);
    expect(await edge.getTask(run.runId, "nope")).toBeNull();
    // A fan-in on an edge reads its fan-out's instances: the run's tasks, none of another room's run.
    expect((await edge.listTasks(run.runId)).map((t) => t.taskId)).toEqual(["a"]);
    const elsewhere = await publishRunning(
      store,
      await becomeLeader(store, "!elsewhere:example.org"),
      dag("edge-b", [task("b")]),
    );
    expect(await edge.listTasks(elsewhere.runId)).toEqual([]);
    expect(await edge.listTasks("no-such-run")).toEqual([]);
    expect(await edge.finishTask(claimed.token, ok)).toEqual({ status: "succeeded" });
    expect((await store.getTask(run.runId, "a"))?.status).toBe("succeeded");
    // The same finish again: the token no longer holds the task; the worker sees the store's conflict.
    await expect(edge.finishTask(claimed.token, ok)).rejects.toBeInstanceOf(ConflictError);
    await expect(edge.renewTaskLease(claimed.token, 30_000)).rejects.toBeInstanceOf(ConflictError);

    await edge.heartbeat({
      session: me,
      labels: ["edge"],
      capacity: 2,
      actions: ["echo"],
      roomIds: [ROOM],
      release: "test",
      protocol: 1,
    });
    const nodes = await store.listNodes();
    expect(nodes.find((n) => n.session.nodeId === "edge-1")?.labels).toEqual(["edge"]);
    // Another node's row cannot be removed by this edge; its own can.
    const leave = await post("/v1/edge/leave", OTHER_EDGE_TOKEN, { session: me });
    expect(leave.status).toBe(403);
    expect((await store.listNodes()).some((n) => n.session.nodeId === "edge-1")).toBe(true);
    await edge.removeNode(me);
    expect((await store.listNodes()).some((n) => n.session.nodeId === "edge-1")).toBe(false);
  });

  it("finishAndClaim hands the slot to the next task in one call", async () => {
    const run = await publishRunning(store, fence, dag("edge-b", [task("x"), task("y")]));
    const edge = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger() });
    const o = offer(session("edge-1"), [ROOM]);
    const first = (await edge.claimTasks(o, 1)).claimed[0]!;
    const { status, batch } = await edge.finishAndClaim(first.token, ok, o, 1);
    expect(status).toBe("succeeded");
    expect(batch.claimed.map((c) => c.task.runId)).toEqual([run.runId]);
    expect(await edge.finishTask(batch.claimed[0]!.token, ok)).toEqual({ status: "succeeded" });
  });

  it("refuses an edge token speaking for another node, on any route, before the store is asked", async () => {
    const run = await publishRunning(store, fence, dag("edge-c", [task("v")]));
    const victim = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger() });
    const claimed = (await victim.claimTasks(offer(session("edge-1"), [ROOM]), 1)).claimed[0]!;
    expect(claimed.task.runId).toBe(run.runId);

    // edge-2's token with edge-1's token: refused by the session check.
    for (const [path, body] of [
      ["/v1/edge/finish", { token: claimed.token, result: ok }],
      ["/v1/edge/renew", { token: claimed.token, leaseMs: 30_000 }],
      ["/v1/edge/release", { token: claimed.token, why: "mine now" }],
      ["/v1/edge/output", { token: claimed.token, output: "x", outputBytes: 1 }],
      ["/v1/edge/claim", { offer: offer(session("edge-1"), [ROOM]), max: 1 }],
      ["/v1/edge/held", { session: claimed.token.session, roomIds: [ROOM] }],
    ] as const) {
      const answer = await post(path, OTHER_EDGE_TOKEN, body);
      expect(answer.status, path).toBe(403);
      expect(answer.body["code"]).toBe("forbidden");
    }
    // The same token with the session rewritten to edge-2's own id: the store's fence refuses it.
    const forged = { ...claimed.token, session: { ...claimed.token.session, nodeId: "edge-2" } };
    const answer = await post("/v1/edge/finish", OTHER_EDGE_TOKEN, { token: forged, result: ok });
    expect(answer.status).toBe(409);
    expect(answer.body["code"]).toBe("lost-claim");
    const t = await store.getTask(run.runId, "v");
    expect(t?.status).toBe("running");
    expect(t?.executor?.nodeId).toBe("edge-1");
    // Another node's heartbeat: refused.
    const beat = await post("/v1/edge/heartbeat", OTHER_EDGE_TOKEN, {
      beat: { session: session("core-1"), labels: [], capacity: 1, actions: [], roomIds: [ROOM] },
    });
    expect(beat.status).toBe(403);
    expect((await store.listNodes()).some((n) => n.session.nodeId === "core-1")).toBe(false);
    // A room the core does not serve: refused as unknown.
    const elsewhere = await post("/v1/edge/claim", EDGE_TOKEN, {
      offer: offer(session("edge-1"), ["other"]),
      max: 1,
    });
    expect(elsewhere.status).toBe(404);
    // The session's own held tasks, with the tokens the claim gave (what an edge adopts after a lost answer).
    const held = await post("/v1/edge/held", EDGE_TOKEN, { session: claimed.token.session, roomIds: [ROOM] });
    expect(held.status).toBe(200);
    expect((held.body["held"] as { token: unknown }[]).map((c) => c.token)).toEqual([claimed.token]);
    await victim.finishTask(claimed.token, ok);
    const after = await post("/v1/edge/held", EDGE_TOKEN, {
      session: claimed.token.session,
      roomIds: [ROOM],
    });
    expect(after.body["held"]).toEqual([]);
  });

  it("refuses an offer or heartbeat beyond the token's labels and actions, before the store is asked", async () => {
    const run = await publishRunning(store, fence, dag("edge-scope", [task("s")]));
    const me = session("edge-3");
    const refusals = [
      ["/v1/edge/claim", { offer: offer(me, [ROOM], { labels: ["cpu", "gpu"] }), max: 1 }, '"gpu"'],
      ["/v1/edge/claim", { offer: offer(me, [ROOM], { actions: ["echo", "rm"] }), max: 1 }, '"rm"'],
      [
        "/v1/edge/heartbeat",
        { beat: { session: me, labels: ["gpu"], capacity: 1, actions: [], roomIds: [ROOM] } },
        '"gpu"',
      ],
      [
        "/v1/edge/heartbeat",
        {
          beat: {
            session: me,
            labels: [],
            capacity: 1,
            actions: ["echo"],
            roomIds: [ROOM],
            actionSpecs: { rm: { name: "rm", argv: ["rm"], args: {} } },
          },
        },
        '"rm"',
      ],
    ] as const;
    for (const [path, body, named] of refusals) {
      const answer = await post(path, SCOPED_EDGE_TOKEN, body);
      expect(answer.status, `${path} ${named}`).toBe(403);
      expect(answer.body["code"]).toBe("forbidden");
      expect(String(answer.body["detail"])).toContain(named);
    }
    // Nothing was claimed, and no row was written for the node.
    expect((await store.getTask(run.runId, "s"))?.status).toBe("queued");
    expect((await store.listNodes()).some((n) => n.session.nodeId === "edge-3")).toBe(false);
    // finish-and-claim's offer is checked too: the finish is not recorded when its offer is refused.
    const edge = new EdgeStore({ cores: [base], token: SCOPED_EDGE_TOKEN, logger: silentLogger() });
    const within = offer(me, [ROOM], { labels: ["cpu"] });
    const claimed = (await edge.claimTasks(within, 1)).claimed[0]!;
    expect(claimed.task.runId).toBe(run.runId);
    const mixed = await post("/v1/edge/finish-and-claim", SCOPED_EDGE_TOKEN, {
      token: claimed.token,
      result: ok,
      offer: offer(me, [ROOM], { actions: ["train"] }),
      max: 1,
    });
    expect(mixed.status).toBe(403);
    expect(String(mixed.body["detail"])).toContain('"train"');
    expect((await store.getTask(run.runId, "s"))?.status).toBe("running");
    expect((await edge.finishAndClaim(claimed.token, ok, within, 1)).status).toBe("succeeded");
  });

  it("refuses a finish over the edge body limit with 413; the edge's client then sends the tail that fits", async () => {
    const run = await publishRunning(store, fence, dag("edge-big", [task("big")]));
    const edge = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger() });
    const claimed = (await edge.claimTasks(offer(session("edge-1"), [ROOM]), 1)).claimed[0]!;
    // The test core's http.edge_output_limit is 64 KiB: its body limit is 6 times that and 1 MiB.
    const limitBytes = edgeBodyLimitBytes(65_536);
    expect(limitBytes).toBe(65_536 * 6 + 1024 * 1024);
    const lines = Array.from({ length: 100_000 }, (_, i) => `line ${i} \u0001\n`).join("");
    const output = `${lines}the end\n`;
    expect(Buffer.byteLength(JSON.stringify(output))).toBeGreaterThan(limitBytes);
    const result = { ...ok, output, outputBytes: Buffer.byteLength(output) };
    for (const [path, body] of [
      ["/v1/edge/finish", { token: claimed.token, result }],
      ["/v1/edge/output", { token: claimed.token, output, outputBytes: result.outputBytes }],
    ] as const) {
      const answer = await post(path, EDGE_TOKEN, body);
      expect(answer.status, path).toBe(413);
      expect(answer.body["code"]).toBe("body-too-large");
      expect(answer.body["limitBytes"]).toBe(limitBytes);
      expect(String(answer.body["detail"])).toContain(String(limitBytes));
    }
    expect((await store.getTask(run.runId, "big"))?.status).toBe("running");
    // Through the client: the outcome is recorded, with the output's tail that fits.
    expect(await edge.finishTask(claimed.token, result)).toEqual({ status: "succeeded" });
    const stored = await store.getTask(run.runId, "big");
    expect(stored?.status).toBe("succeeded");
    expect(stored?.output?.endsWith("the end\n")).toBe(true);
    expect(output.endsWith(stored?.output ?? "")).toBe(true);
    expect(stored!.output!.length).toBeLessThan(output.length);
    expect(stored?.outputBytes).toBe(result.outputBytes);
    // The longest tail that fits, and only that.
    const wrap = (r: typeof result) => ({ token: claimed.token, result: r });
    const fitted = fitOutput(result, wrap, limitBytes)!;
    expect(Buffer.byteLength(JSON.stringify(wrap(fitted)))).toBeLessThanOrEqual(limitBytes);
    const oneMore = { ...result, output: output.slice(-(fitted.output.length + 1)) };
    expect(Buffer.byteLength(JSON.stringify(wrap(oneMore)))).toBeGreaterThan(limitBytes);
  });

  it("answers a task read with what the worker reads only: no output, error or arguments", async () => {
    const run = await publishRunning(
      store,
      fence,
      dag("edge-view", [task("p", { args: { msg: "hush-arg" } }), task("q")]),
    );
    // A core node ran p, and kept its output and error.
    const core = (await store.claimTasks(offer(session("core-1"), [ROOM]), 1)).claimed[0]!;
    expect(core.task.taskId).toBe("p");
    await store.finishTask(core.token, {
      outcome: "failed",
      exitCode: 3,
      output: "hush-output\n",
      error: "hush-error",
    });
    const edge = new EdgeStore({ cores: [base], token: EDGE_TOKEN, logger: silentLogger() });
    const mine = (await edge.claimTasks(offer(session("edge-1"), [ROOM]), 1)).claimed[0]!;
    expect(mine.task.taskId).toBe("q");
    const viewKeys = [
      "attempt",
      "executor",
      "fanOut",
      "outputPatterns",
      "outputValues",
      "runId",
      "status",
      "taskId",
    ];
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${EDGE_TOKEN}` } });
      expect(res.status, path).toBe(200);
      return { text: await res.clone().text(), body: (await res.json()) as Record<string, unknown> };
    };
    const one = await get(`/v1/edge/task?run=${run.runId}&task=p`);
    expect(Object.keys(one.body["task"] as object).sort()).toEqual(viewKeys);
    expect(one.body["task"]).toMatchObject({ status: "failed", attempt: 1, executor: null });
    const all = await get(`/v1/edge/tasks?run=${run.runId}`);
    const tasks = all.body["tasks"] as Record<string, unknown>[];
    expect(tasks.map((t) => Object.keys(t).sort())).toEqual([viewKeys, viewKeys]);
    for (const { text } of [one, all]) {
      expect(text).not.toContain("hush-output");
      expect(text).not.toContain("hush-error");
      expect(text).not.toContain("hush-arg");
      expect(text).not.toContain("core-1");
    }
    // Its own attempt is named: the worker checks a cancel reached that one.
    expect(tasks.find((t) => t["taskId"] === "q")?.["executor"]).toEqual(mine.token.session);
    expect((await edge.getTask(run.runId, "q"))?.executor).toEqual(mine.token.session);
    await edge.finishTask(mine.token, ok);
  });

  it("an edge token calls no other route, and no other token calls the edge routes", async () => {
    for (const path of ["/v1/runs", "/v1/nodes", "/metrics", "/v1/events"]) {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${EDGE_TOKEN}` } });
      expect(res.status, path).toBe(403);
    }
    const publish = await post("/v1/runs", EDGE_TOKEN, { dag: { id: "x", tasks: [] } });
    expect([403, 404, 405]).toContain(publish.status);
    expect(publish.status).not.toBe(200);
    const asReader = await post("/v1/edge/claim", READ_TOKEN, {
      offer: offer(session("edge-1"), [ROOM]),
      max: 1,
    });
    expect(asReader.status).toBe(403);
    const unsigned = await fetch(`${base}/v1/edge/claim`, { method: "POST" });
    expect(unsigned.status).toBe(401);
    // A malformed body: a clear 400 naming the field; nothing claimed.
    const bad = await post("/v1/edge/claim", EDGE_TOKEN, { offer: offer(session("edge-1"), [ROOM]), max: 0 });
    expect(bad.status).toBe(400);
    expect(String(bad.body["detail"])).toContain("max");
  });

  it("moves to the next core when one is gone, and hears its wakes on the stream", async () => {
    const gone = `http://127.0.0.1:${await deadPort()}`;
    const exchanges: string[] = [];
    const edge = new EdgeStore({
      cores: [gone, base],
      token: EDGE_TOKEN,
      logger: silentLogger(),
      reconnectMs: 50,
      onExchange: (path, status) => exchanges.push(`${path} ${status ?? "none"}`),
    });
    expect(edge.core).toBe(gone);
    const batch = await edge.claimTasks(offer(session("edge-1"), [ROOM]), 1);
    expect(batch.claimed).toEqual([]);
    expect(edge.core).toBe(base);
    // A refused connection sent nothing: the claim goes to the next core, no look at what the session holds.
    expect(exchanges).toEqual(["/v1/edge/claim none", "/v1/edge/claim 200"]);
    const heard: string[] = [];
    const unsubscribe = edge.onChange(
      (topic, roomId, nodes) => heard.push(`${topic}:${roomId ?? "*"}:${nodes?.join(",") ?? "all"}`),
      ["wake"],
    );
    try {
      // The stream opens with a wake for everyone (the edge claims for what it may have missed).
      await expect.poll(() => heard, { timeout: 5_000 }).toContain("wake:*:all");
      // The leader's wakes: one naming another node is not relayed; one naming this node is, with its count.
      await store.wakeNodes(ROOM, ["edge-2/1"]);
      await store.wakeNodes(ROOM, ["edge-1/3"]);
      await expect.poll(() => heard, { timeout: 5_000 }).toContain(`wake:${ROOM}:edge-1/3`);
      expect(heard.filter((h) => h.includes("edge-2"))).toEqual([]);
    } finally {
      unsubscribe();
    }
    // Every core gone: the worker sees a StoreError (it backs off and retries).
    const lost = new EdgeStore({ cores: [gone], token: EDGE_TOKEN, logger: silentLogger() });
    await expect(lost.claimTasks(offer(session("edge-1"), [ROOM]), 1)).rejects.toBeInstanceOf(StoreError);
  });

  it("serves at most max_streams wake streams at once: one more is a 503 saying when to retry", async () => {
    const open = () => {
      const abort = new AbortController();
      const res = fetch(`${base}/v1/edge/wakes`, {
        headers: { authorization: `Bearer ${EDGE_TOKEN}` },
        signal: abort.signal,
      });
      return { abort, res };
    };
    // The previous test's stream is closed once the server heard it end.
    const streams = async () =>
      (await api.metrics.registry.getSingleMetric("dagbot_event_stream_clients")?.get())?.values[0]?.value;
    await expect.poll(streams, { timeout: 5_000 }).toBe(0);
    // inProcessHttpConfig allows two streams.
    const held = [open(), open()];
    try {
      for (const h of held) expect((await h.res).status).toBe(200);
      const third = await open().res;
      expect(third.status).toBe(503);
      expect(third.headers.get("retry-after")).toBe("5");
      expect(((await third.json()) as { code?: string }).code).toBe("too-many-streams");
    } finally {
      for (const h of held) h.abort.abort();
    }
    failed = false;
  });
});
