// The room's rules on every path that starts a run, against a real `dagbot node` on SQLite with the
// HTTP API and signed webhooks (docs/architecture.md §3, "Authority"):
// - a webhook on hook_auto_confirm starts a run of its DAG only once someone confirmed the DAG's
//   published run: a delivery for a DAG still pending, or rejected, waits for a person;
// - a run canceled before anyone confirmed it fires no `after` DAG (the firing is recorded as
//   skipped, with the reason), where a confirmed run canceled the same way does;
// - an approval the leader applies after a gate's deadline (it was paused across it) passes nothing;
// - a hook's body_limit is applied while the bytes arrive: a small hook answers 413 to a declared
//   length, or a chunked body, over its own limit before the body is sent, however large another
//   hook's limit is.
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { ROOM, waitForRunStatus } from "../support/engine-cluster.js";
import type { HttpNode } from "../support/http-client.js";
import { call, startLeadingHttpNode, stopLeadingHttpNode } from "../support/http-client.js";
import { freezeOutsideWrite } from "../support/freeze.js";
import { waitFor } from "../support/store-wait.js";

const ENV_SECRET = "DAGBOT_TEST_AUTHORITY_HOOK_SECRET";
const secret = randomBytes(32).toString("hex");

const TABLES = `
[permissions]
hook_auto_confirm = ["small", "large"]

[[webhooks]]
id = "small"
dag = "deploy"
kind = "hmac"
secret_env = "${ENV_SECRET}"
params = { v = "/v" }
body_limit = "1KiB"

[[webhooks]]
id = "large"
dag = "release"
kind = "hmac"
secret_env = "${ENV_SECRET}"
params = { v = "/v" }
body_limit = "1MiB"
`;

const deployDag = (id: string) => ({
  id,
  params: { v: { pattern: "[A-Za-z0-9]{1,20}", default: "none" } },
  tasks: [{ id: "say", action: "echo", args: { message: "deploying {params.v}" } }],
});

let target: Target;
let store: Store;
let api: HttpNode;
let failed = true;

beforeAll(async () => {
  process.env[ENV_SECRET] = secret;
  ({ target, store, api } = await startLeadingHttpNode("run-authority", {
    extra: 'command_timeout = "20s"',
    tables: TABLES,
  }));
}, 60_000);

afterAll(async () => {
  delete process.env[ENV_SECRET];
  await stopLeadingHttpNode({ target, store, api }, failed);
});

/** A signed generic (hmac) delivery of `{ v }` to hook `hook`. */
async function deliver(hook: string, v: string): Promise<{ status: number; body: any; text: string }> {
  const body = JSON.stringify({ v });
  const ts = String(Math.floor(Date.now() / 1000));
  const res = await fetch(`${api.base}/v1/hooks/${hook}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-dagbot-timestamp": ts,
      "x-dagbot-signature": `sha256=${createHmac("sha256", secret).update(`${ts}.${body}`).digest("hex")}`,
      "x-dagbot-delivery": randomUUID(),
    },
    body,
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as unknown, text };
}

async function publish(document: Record<string, unknown>): Promise<void> {
  const published = await call(api.base, "POST", "/v1/dags", { body: { document } });
  expect(published.status, published.text).toBe(201);
  // An HTTP token is not on auto_confirm: the published run waits for a confirmation.
  expect((await store.getRun(ROOM, String(document["id"])))?.status).toBe("pending");
}

/**
 * Sends a request's head and the first bytes of its body (never the rest) on a raw socket, and
 * resolves with the status line the node answers, or null if it has not answered in `waitMs`.
 */
function answerBeforeBody(head: string, firstBytes: string, waitMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect(api.port, "127.0.0.1");
    let seen = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, waitMs);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      seen += chunk;
      const line = seen.split("\r\n")[0];
      if (seen.includes("\r\n") && line !== undefined) {
        clearTimeout(timer);
        socket.destroy();
        resolve(line);
      }
    });
    socket.on("error", () => undefined);
    socket.write(head + firstBytes);
  });
}

describe("the room's rules on every path that starts a run", () => {
  it("a webhook on hook_auto_confirm does not start a DAG nobody confirmed, nor one someone rejected; once confirmed it does", async () => {
    failed = true;
    await publish(deployDag("deploy"));
    // Pending: the delivery's run waits for a person, and nothing ran.
    const whilePending = await deliver("small", "pending1");
    expect(whilePending.status, whilePending.text).toBe(202);
    expect(whilePending.body).toMatchObject({ result: "awaiting-confirmation", needsConfirmation: true });
    expect((await store.getRun(ROOM, whilePending.body.run))?.status).toBe("pending");

    // Rejected by someone: still nobody's confirmation to run on.
    const rejected = await call(api.base, "POST", "/v1/runs/deploy/reject", { body: {} });
    expect(rejected.status, rejected.text).toBe(200);
    expect((await store.getRun(ROOM, "deploy"))?.status).toBe("rejected");
    const afterReject = await deliver("small", "rejected1");
    expect(afterReject.status, afterReject.text).toBe(202);
    expect(afterReject.body).toMatchObject({ result: "awaiting-confirmation", needsConfirmation: true });
    const waiting = (await store.getRun(ROOM, afterReject.body.run))!;
    expect(waiting.status).toBe("pending");
    expect(waiting.publisher).toBe("hook:small");
    expect(await store.listTasks(waiting.runId)).toSatisfy((ts: Array<{ status: string }>) =>
      ts.every((t) => t.status === "blocked"),
    );

    // A DAG whose published run someone confirmed: a delivery starts its run at once.
    await publish(deployDag("release"));
    expect((await call(api.base, "POST", "/v1/runs/release/confirm", { body: {} })).status).toBe(200);
    const confirmed = await deliver("large", "confirmed1");
    expect(confirmed.status, confirmed.text).toBe(202);
    expect(confirmed.body).toMatchObject({ result: "started", needsConfirmation: false });
    await waitForRunStatus(store, confirmed.body.run, (s) => s === "succeeded");
    // The runs of refused content still wait, and ran nothing.
    for (const name of [whilePending.body.run, afterReject.body.run])
      expect((await store.getRun(ROOM, name))?.status).toBe("pending");
    failed = false;
  }, 60_000);

  it("a run canceled before anyone confirmed it fires no after DAG; a confirmed run canceled does", async () => {
    failed = true;
    // `up` runs for `ms`: quick for its first run, long for the one canceled while it runs below
    // (a run that had already succeeded could no longer be canceled).
    await publish({
      id: "up",
      params: {
        v: { pattern: "[A-Za-z0-9]{1,20}", default: "none" },
        ms: { pattern: "[0-9]{1,6}", default: "50" },
      },
      tasks: [{ id: "say", action: "work", args: { ms: "{params.ms}" } }],
    });
    expect((await call(api.base, "POST", "/v1/runs/up/confirm", { body: {} })).status).toBe(200);
    await waitForRunStatus(store, "up", (s) => s === "succeeded");
    const down = {
      id: "down",
      params: { v: { pattern: "[A-Za-z0-9]{1,20}", default: "none" } },
      after: { dag: "up", status: ["canceled"], params: { v: "params.v" } },
      tasks: [{ id: "say", action: "echo", args: { message: "after {params.v}" } }],
    };
    await publish(down);
    expect((await call(api.base, "POST", "/v1/runs/down/confirm", { body: {} })).status).toBe(200);
    await waitForRunStatus(store, "down", (s) => s === "succeeded");

    // A new run of up with a value nobody confirmed, canceled while it waits.
    const started = await call(api.base, "POST", "/v1/runs", { body: { dagId: "up", params: { v: "X" } } });
    expect(started.status, started.text).toBe(201);
    expect(started.body).toMatchObject({ run: { dagId: "up.2" }, needsConfirmation: true });
    expect((await call(api.base, "POST", "/v1/runs/up.2/cancel", { body: {} })).status).toBe(200);
    await waitForRunStatus(store, "up.2", (s) => s === "canceled");
    const skipped = await waitFor(
      "the firing of down for up.2",
      () => store.listAfterFirings(ROOM, { dagId: "down" }),
      (fs) => fs.some((f) => f.upstreamDagId === "up.2"),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const firing = skipped!.find((f) => f.upstreamDagId === "up.2")!;
    expect(firing).toMatchObject({ runId: null, upstreamStatus: "canceled" });
    expect(firing.reason).toBe(
      'the run "up.2" ended before anyone confirmed it; down runs only after approved runs',
    );
    const downRuns = await store.listDefinitionRuns(ROOM, "down");
    expect(downRuns.map((r) => r.dagId)).toEqual(["down"]);

    // Confirmed, then canceled: it ran on that confirmation, and down fires with its value.
    const again = await call(api.base, "POST", "/v1/runs", {
      body: { dagId: "up", params: { v: "Y", ms: "60000" } },
    });
    expect(again.status, again.text).toBe(201);
    const name = String(again.body.run.dagId);
    expect((await call(api.base, "POST", `/v1/runs/${name}/confirm`, { body: {} })).status).toBe(200);
    expect((await call(api.base, "POST", `/v1/runs/${name}/cancel`, { body: {} })).status).toBe(200);
    await waitForRunStatus(store, name, (s) => s === "canceled");
    const fired = await waitFor(
      `the firing of down for ${name}`,
      () => store.listAfterFirings(ROOM, { dagId: "down" }),
      (fs) => fs.some((f) => f.upstreamDagId === name),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const run = fired!.find((f) => f.upstreamDagId === name)!;
    expect(run.reason).toBeNull();
    expect((await store.getRun(ROOM, run.runDagId!))?.dag.values).toEqual({ v: "Y" });
    failed = false;
  }, 90_000);

  it("an approval the leader applies after the gate's deadline does not pass it, though the reaper had not come", async () => {
    failed = true;
    const document = {
      id: "gated",
      tasks: [
        { id: "ok", approve: { who: "operators", approvers: 1, timeout: "1500ms" } },
        { id: "next", action: "echo", needs: ["ok"], args: { message: "past the gate" } },
      ],
    };
    await publish(document);
    expect((await call(api.base, "POST", "/v1/runs/gated/confirm", { body: {} })).status).toBe(200);
    const run = (await store.getRun(ROOM, "gated"))!;
    const opened = await waitFor(
      "the gate open",
      () => store.getTask(run.runId, "ok"),
      (t) => t?.gateState !== null && t?.gateState !== undefined,
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    const deadline = opened!.deadline!;
    // The leader paused across the deadline; the approval is in its inbox when it wakes, as the
    // CLI puts it there, so the leader may handle it before its reaper looks at the gate. It is never
    // frozen inside a write transaction, which would keep the test's own write out.
    await freezeOutsideWrite((signal) => api.node.kill(signal), target);
    try {
      await waitFor(
        "the store's clock past the deadline",
        () => store.now(),
        (now) => now > deadline + 200,
        {
          timeoutMs: 10_000,
          intervalMs: 50,
        },
      );
      await store.insertInboxEvent({
        eventId: `cli.${randomUUID()}`,
        roomId: ROOM,
        sender: "local:tester",
        originServerTs: await store.now(),
        content: {
          msgtype: "m.text",
          "dagbot.command": { verb: "approve", id: "gated", gate: "ok", values: [] },
        },
        seenBy: "cli",
      });
    } finally {
      api.node.kill("SIGCONT");
    }
    await waitForRunStatus(store, "gated", (s) => s === "failed" || s === "succeeded");
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.status).toBe("timed_out");
    expect(gate.gateState?.approvals).toEqual([]);
    expect((await store.getTask(run.runId, "next"))?.status).toBe("skipped");
    expect((await store.getRun(ROOM, "gated"))?.status).toBe("failed");
    failed = false;
  }, 60_000);

  it("a hook's body_limit is applied as the bytes arrive: 413 before the body is sent, declared or chunked", async () => {
    failed = true;
    const head = (extra: string) =>
      `POST /v1/hooks/small HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${extra}\r\n`;
    // 900,000 bytes declared, within the large hook's 1 MiB: the small hook refuses it at once.
    const declared = await answerBeforeBody(head("content-length: 900000\r\n"), "x".repeat(100), 10_000);
    expect(declared).toBe("HTTP/1.1 413 Payload Too Large");
    // No length declared: the 1,025th byte stops the read.
    const chunk = "x".repeat(2_048);
    const chunked = await answerBeforeBody(
      head("transfer-encoding: chunked\r\n"),
      `${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      10_000,
    );
    expect(chunked).toBe("HTTP/1.1 413 Payload Too Large");
    // An unknown hook is a 404 before its body is read too.
    const unknown = await answerBeforeBody(
      head("content-length: 900000\r\n").replace("/v1/hooks/small", "/v1/hooks/nosuch"),
      "x",
      10_000,
    );
    expect(unknown).toBe("HTTP/1.1 404 Not Found");
    const metrics = (await call(api.base, "GET", "/metrics")).text;
    expect(metrics).toMatch(/^dagbot_webhook_refused_total\{hook="small",reason="too-large"\} 2$/m);
    failed = false;
  }, 60_000);
});
