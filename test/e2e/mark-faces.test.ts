// `mark` against a real `dagbot node` on SQLite, from the CLI and over HTTP (chat: matrix-mark.test.ts):
// a failed task marked succeeded over HTTP lets its skipped dependent run, an open gate marked
// succeeded from the CLI lets its dependent run, and the run ends succeeded with each mark in its
// history (who, from which face, why). A read-only token is refused; marking a task that succeeded
// is refused with exit 1.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { cli, ROOM, waitForRunStatus, waitForTasks } from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, READ_TOKEN, startLeadingHttpNode, stopLeadingHttpNode } from "../support/http-client.js";

let target: Target;
let store: Store;
let api: HttpNode;
let failed = true;

beforeAll(async () => {
  ({ target, store, api } = await startLeadingHttpNode("mark-faces", {
    extra: 'command_timeout = "20s"',
    tables: `\n[actions.fail]\nargv = ["false"]\ntimeout = "10s"\nkill_grace = "300ms"\n`,
  }));
}, 30_000);

afterAll(async () => {
  await stopLeadingHttpNode({ target, store, api }, failed);
});

describe("mark from the CLI and over HTTP", () => {
  it("unblocks a failed task's dependent and an open gate's, and the run ends succeeded with both marks kept", async () => {
    const document = {
      id: "ship",
      tasks: [
        { id: "build", action: "fail" },
        { id: "after", action: "echo", args: { message: "after build" }, needs: ["build"] },
        { id: "ok", approve: {} },
        { id: "deploy", action: "echo", args: { message: "deploy" }, needs: ["ok"] },
      ],
    };
    const published = await call(api.base, "POST", "/v1/dags", { body: { document } });
    expect(published.status, published.text).toBe(201);
    if ((await store.getRun(ROOM, "ship"))?.status === "pending")
      expect((await call(api.base, "POST", "/v1/runs/ship/confirm", { body: {} })).status).toBe(200);
    const run = (await store.getRun(ROOM, "ship"))!;
    await waitForTasks(store, run.runId, "build failed, after skipped, the gate open", (ts) => {
      const by = Object.fromEntries(ts.map((t) => [t.taskId, t]));
      return by["after"]?.status === "skipped" && by["ok"]?.gateState !== null;
    });

    // HTTP: only an operator's token may mark; the operator's mark lets `after` run.
    const viewer = await call(api.base, "POST", "/v1/runs/ship/tasks/build/mark", {
      token: READ_TOKEN,
      body: { to: "succeeded" },
    });
    expect(viewer.status, viewer.text).toBe(403);
    const marked = await call(api.base, "POST", "/v1/runs/ship/tasks/build/mark", {
      body: { to: "succeeded", reason: "known flake" },
    });
    expect(marked.status, marked.text).toBe(200);
    expect(marked.body).toMatchObject({
      result: "marked",
      taskId: "build",
      from: "failed",
      revived: ["after"],
    });
    await waitForTasks(store, run.runId, "after succeeded", (ts) =>
      ts.some((t) => t.taskId === "after" && t.status === "succeeded"),
    );

    // CLI: the gate marked succeeded; deploy runs, the run ends succeeded.
    const config = join(target.dir, "h1.toml");
    const gate = await cli([
      "mark",
      "ship",
      "ok",
      "succeeded",
      "approved",
      "on",
      "the",
      "phone",
      "--json",
      "--config",
      config,
    ]);
    expect(gate.code, gate.stdout + gate.stderr).toBe(0);
    expect(JSON.parse(gate.stdout)).toMatchObject({
      ok: true,
      answer: "mark",
      result: "marked",
      taskId: "ok",
    });
    expect(await waitForRunStatus(store, "ship", (s) => s === "succeeded" || s === "failed")).toBe(
      "succeeded",
    );
    const again = await cli(["mark", "ship", "after", "skipped", "--config", config]);
    expect(again.code).toBe(1);
    expect(again.stdout).toContain("cannot be marked: its run succeeded");

    const tasks = Object.fromEntries((await store.listTasks(run.runId)).map((t) => [t.taskId, t]));
    expect(tasks["build"]!.error).toMatch(
      /^marked succeeded by http:ops \(http \d\d:\d\d UTC\): known flake$/,
    );
    expect(tasks["deploy"]!.output).toBe("deploy\n");
    const lines = (await store.readEvents(ROOM, 0)).filter((e) => e.data["mark"] === true);
    expect(lines.map((e) => [e.taskId, e.data["face"], e.data["reason"]])).toEqual([
      ["build", "http", "known flake"],
      ["ok", "cli", "approved on the phone"],
    ]);
    failed = false;
  }, 60_000);
});
