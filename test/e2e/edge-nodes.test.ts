// Edge nodes (docs/operations.md, "Edge nodes"): real node processes on a fresh PostgreSQL database.
// Two core nodes hold the store and serve the HTTP API with edge tokens; three edge nodes hold no
// store and run every task through the cores. Each task's action appends a line to a file, so what
// ran is counted from the actions' own records. One core is killed with SIGKILL mid-run: the
// edges carry on through the other. An edge token cannot speak for another node nor call any
// route but /v1/edge/.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeDag,
} from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, startHttpNode } from "../support/http-client.js";
import { waitFor } from "../support/store-wait.js";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");
const EDGES = ["edge-1", "edge-2", "edge-3"] as const;
const TASKS = 40;

interface Ctx {
  target: Target;
  store: Store;
  nodes: NodeProcess[];
}

/**
 * The edge tokens as a core's extra [[http.tokens]] tables, one per edge, each bound to its node and
 * kept to the label and action the edges have (a claim or heartbeat naming others would be a 403).
 */
function edgeTokenTables(tokens: ReadonlyMap<string, string>): string {
  return [...tokens]
    .map(
      ([node, token]) => `
[[http.tokens]]
name = "${node}"
sha256 = "${sha(token)}"
level = "edge"
node = "${node}"
labels = ["edge"]
actions = ["append"]
`,
    )
    .join("");
}

/** An edge node's config: no store, the cores in the order given, an action that appends a record. */
function writeEdgeConfig(target: Target, nodeId: string, cores: readonly string[], token: string): string {
  const tokenFile = join(target.dir, `${nodeId}.token`);
  writeFileSync(tokenFile, token);
  chmodSync(tokenFile, 0o600);
  const records = join(target.dir, "records.txt");
  const argv = ["sh", "-c", `sleep 0.5; printf '%s %s\\n' "$0" "$1" >> "$2"`, "{task}", nodeId, records];
  const path = join(target.dir, `${nodeId}.toml`);
  writeFileSync(
    path,
    `
node_id = "${nodeId}"
labels = ["edge"]
capacity = 2
log_level = "debug"

[edge]
cores = ${JSON.stringify(cores)}
token_file = ${JSON.stringify(tokenFile)}
request_timeout = "3s"

[lease]
ttl = "3s"
task_ttl = "3s"
renew_every = "500ms"
acquire_every = "1s"

[actions.append]
argv = [${argv.map((a) => JSON.stringify(a)).join(", ")}]
args = { task = { pattern = '[a-z0-9-]{1,20}' } }
timeout = "30s"
kill_grace = "300ms"
`,
  );
  return path;
}

/** The records the actions appended: one `task node` line per run of an action. */
function records(target: Target): Array<{ task: string; node: string }> {
  const file = join(target.dir, "records.txt");
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [task = "", node = ""] = l.split(" ");
      return { task, node };
    });
}

describe("edge nodes: workers with no store connection, through two core nodes", () => {
  let ctx: Ctx | null = null;
  let failed = true;

  afterEach(async () => {
    if (ctx === null) return;
    await killAll(ctx.nodes);
    await ctx.store.close();
    await ctx.target.cleanup(failed);
    ctx = null;
  });

  it("runs each task exactly once on the edges, carries on when a core is killed, and refuses an edge's overreach", async () => {
    requireBuild();
    const target = await createTarget("postgres", "edge");
    const store = await target.open();
    ctx = { target, store, nodes: [] };
    const tokens = new Map(EDGES.map((e) => [e, randomBytes(24).toString("hex")]));

    // Two core nodes: the store, the HTTP API with the edge tokens, and none of the edges' actions.
    const cores: HttpNode[] = [];
    for (const id of ["core-1", "core-2"]) {
      const core = await startHttpNode(target, id, { tables: edgeTokenTables(tokens) });
      ctx.nodes.push(core.node);
      cores.push(core);
    }
    const [core1, core2] = cores as [HttpNode, HttpNode];
    // edge-1 and edge-2 talk to core-1 first; edge-3 to core-2.
    for (const edge of EDGES) {
      const order = edge === "edge-3" ? [core2.base, core1.base] : [core1.base, core2.base];
      const config = writeEdgeConfig(target, edge, order, tokens.get(edge)!);
      ctx.nodes.push(startNode(target, config, edge));
    }
    await waitFor(
      "the edges' heartbeats, through the cores",
      () => store.listNodes(),
      (nodes) => EDGES.every((e) => nodes.some((n) => n.session.nodeId === e)),
      { timeoutMs: 20_000, intervalMs: 50 },
    );

    const dag = {
      id: "fan",
      tasks: Array.from({ length: TASKS }, (_, i) => ({
        id: `t${i}`,
        action: "append",
        args: { task: `t${i}` },
      })),
    };
    const coreConfig = join(target.dir, "core-2.toml");
    const submitted = await cli(["submit", writeDag(target, dag), "--config", coreConfig, "--confirm"]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const run = await store.getRun(ROOM, submitted.stdout.trim());
    expect(run).not.toBeNull();

    // Mid-run, core-1 (the first core of two of the edges) dies without a word.
    const before = await waitFor(
      "some tasks done",
      () => records(target),
      (r) => r.length >= 8,
      {
        timeoutMs: 60_000,
        intervalMs: 20,
      },
    );
    expect(before.length).toBeLessThan(TASKS);
    core1.node.kill("SIGKILL");
    await core1.node.exited;

    await waitFor(
      "the run to succeed",
      () => store.getRun(ROOM, "fan"),
      (r) => r?.status === "succeeded",
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    const after = records(target);
    // Exactly once: each task's action ran one time, counted from the actions' own records.
    expect(after.map((r) => r.task).sort()).toEqual(dag.tasks.map((t) => t.id).sort());
    // All on edges, and the edges that began on core-1 ran tasks after it died.
    expect(new Set(after.map((r) => r.node))).toEqual(
      new Set(after.map((r) => r.node).filter((n) => n.startsWith("edge-"))),
    );
    const later = after.slice(before.length);
    expect(later.some((r) => r.node === "edge-1" || r.node === "edge-2")).toBe(true);
    const tasks = await store.listTasks(run!.runId);
    expect(tasks.every((t) => t.status === "succeeded" && t.executor?.nodeId.startsWith("edge-"))).toBe(true);
    const edge1Log = readFileSync(join(target.dir, "edge-1.log"), "utf8");
    expect(edge1Log).toContain("moving to the next core");
    expect(edge1Log).not.toContain(tokens.get("edge-1")!);

    // The attacker: edge-1's token against the live core.
    const mine = tokens.get("edge-1")!;
    const victim = tasks.find((t) => t.executor?.nodeId !== "edge-1")!;
    const theirs = {
      runId: victim.runId,
      taskId: victim.taskId,
      version: victim.version,
      session: victim.executor!,
    };
    const result = { outcome: "failed", exitCode: 1, output: "", error: "forged" };
    const asOther = await call(core2.base, "POST", "/v1/edge/finish", {
      token: mine,
      body: { token: theirs, result },
    });
    expect(asOther.status).toBe(403);
    const forged = await call(core2.base, "POST", "/v1/edge/finish", {
      token: mine,
      body: { token: { ...theirs, session: { ...theirs.session, nodeId: "edge-1" } }, result },
    });
    expect(forged.status).toBe(409);
    expect((await store.getTask(victim.runId, victim.taskId))?.status).toBe("succeeded");
    for (const [method, path] of [
      ["GET", "/v1/runs"],
      ["GET", "/v1/nodes"],
      ["POST", `/v1/runs/${run!.runId}/retry`],
      ["POST", "/v1/dags"],
    ] as const) {
      const answer = await call(core2.base, method, path, {
        token: mine,
        ...(method === "POST" ? { body: {} } : {}),
      });
      expect(answer.status, `${method} ${path}`).toBe(403);
    }
    // A graceful stop: the edge leaves through the core, its row gone from the store.
    const edge3 = ctx.nodes.find((n) => n.nodeId === "edge-3")!;
    edge3.kill("SIGTERM");
    expect((await edge3.exited).code).toBe(0);
    expect((await store.listNodes()).some((n) => n.session.nodeId === "edge-3")).toBe(false);
    expect((await store.listNodes()).some((n) => n.session.nodeId === "edge-2")).toBe(true);
    failed = false;
  }, 240_000);
});
