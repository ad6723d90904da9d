// POST /v1/runs/{id}/gates/{task}/approve|deny against a real `dagbot node` on SQLite: through the
// room's inbox like `!dag approve`, answered with the gate's result, the form's values checked and
// kept as the gate's outputs; a gate that is not open, or decided already, is a 409.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { ROOM, waitForRunStatus, waitForTasks } from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, startLeadingHttpNode, stopLeadingHttpNode } from "../support/http-client.js";

let target: Target;
let store: Store;
let api: HttpNode;
let failed = true;

beforeAll(async () => {
  ({ target, store, api } = await startLeadingHttpNode("http-gates", { extra: 'command_timeout = "20s"' }));
}, 30_000);

afterAll(async () => {
  await stopLeadingHttpNode({ target, store, api }, failed);
});

describe("approval gates over HTTP", () => {
  it("approves with the form's values, refuses a bad value with 422, denies, and answers 409 on a decided gate", async () => {
    const document = {
      id: "ship",
      tasks: [
        { id: "ok", approve: { form: { ticket: "^[A-Z]+-[0-9]+$" } } },
        { id: "go", action: "echo", args: { message: "ship {tasks.ok.outputs.ticket}" }, needs: ["ok"] },
        { id: "no", approve: {} },
        { id: "never", action: "echo", args: { message: "never" }, needs: ["no"] },
      ],
    };
    const published = await call(api.base, "POST", "/v1/dags", { body: { document } });
    expect(published.status, published.text).toBe(201);
    const pending = await store.getRun(ROOM, "ship");
    if (pending?.status === "pending") {
      const r = await call(api.base, "POST", "/v1/runs/ship/confirm", { body: {} });
      expect(r.status, r.text).toBe(200);
    }
    const run = (await store.getRun(ROOM, "ship"))!;
    await waitForTasks(
      store,
      run.runId,
      "both gates open",
      (ts) => ts.filter((t) => t.gate !== null && t.gateState !== null).length === 2,
    );
    const bad = await call(api.base, "POST", "/v1/runs/ship/gates/ok/approve", {
      body: { values: { ticket: "x" } },
    });
    expect(bad.status, bad.text).toBe(400);
    expect(bad.text).toContain('field \\"ticket\\"');
    const ok = await call(api.base, "POST", "/v1/runs/ship/gates/ok/approve", {
      body: { values: { ticket: "OPS-9" } },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toMatchObject({ result: "approved", gate: "ok", values: { ticket: "OPS-9" } });
    expect(String(ok.body.by)).toMatch(/^http:/);
    const no = await call(api.base, "POST", "/v1/runs/ship/gates/no/deny", { body: { reason: "not now" } });
    expect(no.status, no.text).toBe(200);
    expect(no.body).toMatchObject({ result: "denied", gate: "no" });
    const again = await call(api.base, "POST", "/v1/runs/ship/gates/no/approve", { body: {} });
    expect(again.status, again.text).toBe(409);
    expect(await waitForRunStatus(store, "ship", (s) => s === "failed" || s === "succeeded")).toBe("failed");
    const tasks = Object.fromEntries((await store.listTasks(run.runId)).map((t) => [t.taskId, t]));
    expect(tasks["go"]!.output).toBe("ship OPS-9\n");
    expect(tasks["never"]!.status).toBe("skipped");
    const approval = (await store.readEvents(ROOM, 0)).find((e) => e.kind === "gate.approval")!;
    expect(approval.data).toMatchObject({ face: "http", values: { ticket: "OPS-9" } });
    failed = false;
  }, 60_000);
});
