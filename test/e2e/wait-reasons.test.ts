// Why a task waits, as a user asks for it (docs/chat.md, "Why a task waits"): real `dagbot node` processes on a real
// SQLite file, read through `dagbot status --json` and the HTTP API; and `dagbot run` saying why its
// run is held instead of printing nothing.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  CLI,
  ROOM,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { READ_TOKEN, call, startHttpNode } from "../support/http-client.js";
import { waitFor } from "../support/store-wait.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("wait-reasons");
const { track } = scratch;

beforeAll(() => {
  requireBuild();
});

interface Wait {
  kind: string;
  text: string;
  [field: string]: unknown;
}

describe("a waiting task says why, in CLI status JSON and HTTP task JSON", () => {
  let target: Target;
  let api: HttpNode;
  let store: Store;
  const others: NodeProcess[] = [];
  let failed = true;

  beforeAll(async () => {
    target = await createTarget("sqlite", "wait-reasons");
    api = await startHttpNode(target, "h1", { extra: 'command_timeout = "20s"' });
    store = await target.open();
    await waitFor(
      "h1 leading",
      () => store.getLease(ROOM),
      (l) => l?.holder?.nodeId === "h1",
    );
  }, 30_000);

  afterAll(async () => {
    await killAll([api.node, ...others]);
    await store?.close();
    await target?.cleanup(failed);
  });

  const publish = async (id: string, tasks: Record<string, unknown>[]): Promise<void> => {
    const pub = await call(api.base, "POST", "/v1/dags", { body: { document: { id, tasks } } });
    expect(pub.status, pub.text).toBe(201);
    const confirm = await call(api.base, "POST", `/v1/runs/${id}/confirm`, {
      body: { hash: pub.body.run.hash },
    });
    expect(confirm.status, confirm.text).toBe(200);
  };
  /** The wait of the run's only task, as `GET /v1/runs/:id` and `dagbot status --json` give it. */
  const waits = async (id: string): Promise<{ http: Wait | undefined; cli: Wait | undefined }> => {
    const r = await call(api.base, "GET", `/v1/runs/${id}`, { token: READ_TOKEN });
    expect(r.status, r.text).toBe(200);
    const status = await cli(["status", id, "--json", "--config", join(target.dir, "h1.toml")], {
      cwd: target.dir,
    });
    expect(status.code, status.stderr).toBe(0);
    const tasks = (JSON.parse(status.stdout) as { tasks: Array<{ wait?: Wait }> }).tasks;
    return { http: r.body.tasks[0]?.wait as Wait | undefined, cli: tasks[0]?.wait };
  };

  it("cap 0: room paused; an action no live node offers: names it; a held concurrency key: names it and its holder", async () => {
    const cap0 = await call(api.base, "PUT", "/v1/rooms/local/cap", { body: { cap: 0 } });
    expect(cap0.status, cap0.text).toBe(200);
    await publish("held", [{ id: "greet", action: "echo", args: { message: "hi" } }]);
    const paused = await waits("held");
    expect(paused.http).toMatchObject({ kind: "paused", text: "room paused (cap 0)" });
    expect(paused.cli).toEqual(paused.http);

    // A node offering `deploy` lets the DAG be published; it leaves (a graceful stop drops its
    // heartbeat row) before the room is opened again, so the task is queued with nobody to take it.
    const n2Config = writeNodeConfig(target, {
      nodeId: "n2",
      extra: '[actions.deploy]\nargv = ["true"]\ntimeout = "10s"\nkill_grace = "300ms"\n',
    });
    const n2 = startNode(target, n2Config, "n2");
    others.push(n2);
    await waitFor(
      "n2 heard",
      () => store.listNodes(),
      (nodes) => nodes.some((n) => n.session.nodeId === "n2"),
      { timeoutMs: 15_000 },
    );
    await publish("ship", [{ id: "eu", action: "deploy" }]);
    n2.kill("SIGTERM");
    await n2.exited;
    expect((await store.listNodes()).map((n) => n.session.nodeId)).toEqual(["h1"]);
    const cap5 = await call(api.base, "PUT", "/v1/rooms/local/cap", { body: { cap: 5 } });
    expect(cap5.status, cap5.text).toBe(200);
    const shipped = await waitFor(
      "eu queued",
      () => waits("ship"),
      (w) => w.http?.kind === "no-node",
      { timeoutMs: 15_000 },
    );
    expect(shipped.http).toEqual({
      kind: "no-node",
      action: "deploy",
      labels: [],
      node: null,
      text: "no live node offers action `deploy`",
    });
    expect(shipped.cli).toEqual(shipped.http);
    await waitFor(
      "held succeeded once the room opened",
      () => store.getRun(ROOM, "held"),
      (r) => r?.status === "succeeded",
    );

    await publish("holder", [{ id: "hold", action: "work", args: { ms: "30000" }, concurrency_key: "s3" }]);
    await waitFor(
      "hold running",
      async () => {
        const run = await store.getRun(ROOM, "holder");
        return run === null ? null : (await store.getTask(run.runId, "hold"))?.status;
      },
      (status) => status === "running",
    );
    await publish("waiter", [
      { id: "upload", action: "echo", args: { message: "up" }, concurrency_key: "s3" },
    ]);
    const keyed = await waits("waiter");
    expect(keyed.http).toEqual({
      kind: "concurrency-key",
      key: "s3",
      holder: { dagId: "holder", taskId: "hold" },
      text: "concurrency key `s3` held by `holder/hold`",
    });
    expect(keyed.cli).toEqual(keyed.http);
    failed = false;
  }, 90_000);
});

describe("dagbot run", () => {
  it("prints why its run waits once it has waited a moment, and again when the reason changes", async () => {
    const target = await createTarget("sqlite", "run-waits");
    let failed = true;
    try {
      const config = writeNodeConfig(target, { nodeId: "solo" });
      // No node yet: the cap waits in the inbox and the run's first leader applies it before scheduling.
      const cap0 = await track(cli(["cap", "0", "--config", config], { cwd: target.dir }));
      expect(cap0.code, cap0.stderr).toBe(0);
      const dag = writeDag(target, {
        id: "trio",
        tasks: ["a", "b", "c"].map((id) => ({ id, action: "work", args: { ms: "1500" } })),
      });
      const child = spawn(process.execPath, [CLI, "run", dag, "--config", config, "--nodes", "1"], {
        cwd: target.dir,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, DAGBOT_LOG_LEVEL: "warn" },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
      try {
        await waitFor(
          "the paused line",
          () => stdout,
          (out) => out.includes("trio: 3 tasks wait: room paused (cap 0)"),
          { timeoutMs: 30_000 },
        );
        const cap1 = await track(cli(["cap", "1", "--config", config], { cwd: target.dir }));
        expect(cap1.code, cap1.stderr).toBe(0);
        expect(await exited, `${stdout}\n${stderr}`).toBe(0);
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      expect(stdout).toMatch(/\d\d:\d\d:\d\d trio: 2 tasks wait: room cap reached \(1 active\)/);
      expect(stdout).toMatch(/\d\d:\d\d:\d\d trio: 1 task waits: room cap reached \(1 active\)/);
      // Each reason once, in the order they held.
      const lines = stdout.split("\n").filter((l) => l.includes("trio: "));
      expect(lines.map((l) => l.slice(9))).toEqual([
        "trio: 3 tasks wait: room paused (cap 0)",
        "trio: 2 tasks wait: room cap reached (1 active)",
        "trio: 1 task waits: room cap reached (1 active)",
      ]);
      expect(stdout).toMatch(/run trio \([0-9a-f-]+\) succeeded/);
      failed = false;
    } finally {
      await target.cleanup(failed);
    }
  }, 90_000);
});
