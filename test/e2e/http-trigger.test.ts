// POST /v1/runs against a real `dagbot node` on SQLite: a new run of a published DAG with parameter
// values, through the room's inbox like `!dag run`; refused values are problems that store nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { ROOM, waitForRunStatus } from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, startLeadingHttpNode, stopLeadingHttpNode } from "../support/http-client.js";

let target: Target;
let store: Store;
let api: HttpNode;
let failed = true;

beforeAll(async () => {
  ({ target, store, api } = await startLeadingHttpNode("http-trigger", { extra: 'command_timeout = "20s"' }));
}, 30_000);

afterAll(async () => {
  await stopLeadingHttpNode({ target, store, api }, failed);
});

async function confirmed(dagId: string): Promise<void> {
  const run = await store.getRun(ROOM, dagId);
  if (run?.status === "pending") {
    const r = await call(api.base, "POST", `/v1/runs/${dagId}/confirm`, { body: {} });
    expect(r.status, r.text).toBe(200);
  }
  await waitForRunStatus(store, dagId, (s) => s === "succeeded");
}

describe("POST /v1/runs", () => {
  it("starts new runs of a published DAG with checked parameters", async () => {
    const document = {
      id: "greet",
      params: { who: { pattern: "[a-z]{1,20}", default: "world" } },
      tasks: [{ id: "say", action: "echo", args: { message: "hello {params.who}" } }],
    };
    const published = await call(api.base, "POST", "/v1/dags", { body: { document } });
    expect(published.status, published.text).toBe(201);
    await confirmed("greet");

    const started = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "greet", params: { who: "ann" } },
    });
    expect(started.status, started.text).toBe(201);
    // A 201 says where the new run is read.
    expect(started.headers.get("location")).toBe("/v1/runs/greet.2");
    // Plain data and HTTP words: no chat command in the answer's text.
    expect(started.text).not.toContain("!dag");
    expect((started.body as { text: string }).text).toContain("POST /v1/runs/greet.2/confirm");
    expect(started.body).toMatchObject({
      result: "created",
      run: { dagId: "greet.2", definition: "greet", params: { who: "ann" } },
    });
    await confirmed("greet.2");
    const run = (await store.getRun(ROOM, "greet.2"))!;
    const [task] = await store.listTasks(run.runId);
    expect(task?.args).toEqual({ message: "hello ann" });
    expect(task?.output).toContain("hello ann");
    // The first run kept its default.
    const [first] = await store.listTasks((await store.getRun(ROOM, "greet"))!.runId);
    expect(first?.output).toContain("hello world");

    const before = (await store.listRuns(ROOM)).length;
    const bad = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "greet", params: { who: "Ann!" } },
    });
    expect(bad.status, bad.text).toBe(400);
    expect(bad.body.detail).toMatch(/parameter "who"/);
    const unknown = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "greet", params: { whom: "x" } },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.detail).toMatch(/unknown parameter "whom"/);
    const spaced = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "greet", params: { who: "a b" } },
    });
    expect(spaced.status).toBe(400);
    const missing = await call(api.base, "POST", "/v1/runs", { body: { dagId: "nosuch" } });
    expect(missing.status).toBe(404);
    expect((await store.listRuns(ROOM)).length).toBe(before);

    // Triggers are counted as what they are.
    const metrics = await call(api.base, "GET", "/metrics");
    expect(metrics.text).toMatch(/dagbot_commands_total\{verb="run",outcome="published"[^}]*\} [1-9]/);
    failed = false;
  }, 60_000);

  it("a value the action refuses is a 400 naming the parameter; a confirmation by another hash is a 409 naming the run's", async () => {
    const document = {
      id: "flags",
      params: { who: { pattern: "[a-z-]{1,20}", default: "x" } },
      tasks: [{ id: "say", action: "echo", args: { message: "{params.who}" } }],
    };
    expect((await call(api.base, "POST", "/v1/dags", { body: { document } })).status).toBe(201);
    const before = (await store.listRuns(ROOM)).length;
    const dash = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "flags", params: { who: "-rf" } },
    });
    expect(dash.status, dash.text).toBe(400);
    expect(dash.body).toMatchObject({ code: "command-error" });
    expect((dash.body as { detail: string }).detail).toMatch(/^parameter "who" \(value "-rf"\)/);
    expect((await store.listRuns(ROOM)).length).toBe(before);

    const run = (await store.getRun(ROOM, "flags"))!;
    const other = run.hash.startsWith("0") ? "1".repeat(12) : "0".repeat(12);
    const wrong = await call(api.base, "POST", "/v1/runs/flags/confirm", { body: { hash: other } });
    expect(wrong.status, wrong.text).toBe(409);
    expect(wrong.body).toMatchObject({ code: "hash-mismatch", hash: run.hash, given: other });
    expect((wrong.body as { title: string }).title).not.toMatch(/policy/);
    expect((await store.getRun(ROOM, "flags"))?.status).toBe("pending");
    const right = await call(api.base, "POST", "/v1/runs/flags/confirm", {
      body: { hash: run.hash.slice(0, 12) },
    });
    expect(right.status, right.text).toBe(200);
  }, 60_000);
});
