// The HTTP API of a real `dagbot node` process on a real SQLite file, through real HTTP: auth,
// every route's success and problem shapes, idempotency under concurrency, the OpenAPI document,
// metrics and health.
import { Validator } from "@seriousme/openapi-schema-validator";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  createTarget,
  killAll,
  startNode,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import type { HttpNode, JsonResponse } from "../support/http-client.js";
import {
  READ_TOKEN,
  SseClient,
  call,
  startHttpNode,
  startLeadingHttpNode,
  stopLeadingHttpNode,
} from "../support/http-client.js";
import { freezeOutsideWrite } from "../support/freeze.js";
import { waitFor } from "../support/store-wait.js";

let target: Target;
let store: Store;
let api: HttpNode;
let failed = false;

beforeAll(async () => {
  ({ target, store, api } = await startLeadingHttpNode("http-api", {
    extra: 'body_limit = "8KiB"\ncommand_timeout = "20s"\nmax_streams = 2',
    // Publishes its argument as the output `version`.
    tables: [
      "",
      "[actions.emit]",
      `argv = ["sh", "-c", 'echo "version=$0" >> "$DAGBOT_OUTPUT"', "{v}"]`,
      "args = { v = { pattern = '[0-9.]{1,20}' } }",
      'kill_grace = "300ms"',
      "",
    ].join("\n"),
  }));
}, 30_000);

afterAll(async () => {
  await stopLeadingHttpNode({ target, store, api }, failed);
});

const track = async <T>(p: Promise<T>): Promise<T> => {
  try {
    return await p;
  } catch (e) {
    failed = true;
    throw e;
  }
};

function expectProblem(r: JsonResponse, status: number, code: string): void {
  expect(r.status, r.text).toBe(status);
  expect(r.contentType).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({
    type: `urn:dagbot:problem:${code}`,
    status,
    code,
    title: expect.any(String),
  });
  // Never a stack trace.
  expect(r.text).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);
}

const hello = (id: string, message = "hi"): Record<string, unknown> => ({
  document: { id, tasks: [{ id: "greet", action: "echo", args: { message } }] },
});

describe("auth", () => {
  it("refuses a request without a token or with a wrong one (401), and a read token's write (403)", async () => {
    await track(
      (async () => {
        const none = await call(api.base, "GET", "/v1/runs", { token: null });
        expectProblem(none, 401, "unauthorized");
        expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
        expectProblem(
          await call(api.base, "GET", "/v1/runs", { token: "not-a-configured-token-xxxx" }),
          401,
          "unauthorized",
        );
        expectProblem(
          await call(api.base, "GET", "/v1/runs", {
            token: null,
            headers: { authorization: "Basic dXNlcjpwdw==" },
          }),
          401,
          "unauthorized",
        );
        const write = await call(api.base, "POST", "/v1/dags", { token: READ_TOKEN, body: hello("nope") });
        expectProblem(write, 403, "forbidden");
        expect((await call(api.base, "GET", "/v1/runs", { token: READ_TOKEN })).status).toBe(200);
        // The refused write left nothing in the store.
        expect(await store.getRun(ROOM, "nope")).toBeNull();
      })(),
    );
  });

  it("answers health without a token and metrics only with one (the defaults); tokens never reach the log", async () => {
    await track(
      (async () => {
        const health = await call(api.base, "GET", "/healthz", { token: null });
        expect(health.status).toBe(200);
        const ready = await call(api.base, "GET", "/readyz", { token: null });
        expect(ready.body).toEqual({ ok: true, checks: { store: "ok", heartbeat: "ok", policy: "ok" } });
        expectProblem(await call(api.base, "GET", "/metrics", { token: null }), 401, "unauthorized");
        const metrics = await call(api.base, "GET", "/metrics", { token: READ_TOKEN });
        expect(metrics.status).toBe(200);
        expect(metrics.text).toContain('dagbot_leader{room="local"} 1');
        const { readFileSync } = await import("node:fs");
        const log = readFileSync(api.node.logPath, "utf8");
        expect(log).toContain("http api listening");
        expect(log).not.toContain("token-0123456789abcdef");
      })(),
    );
  });
});

describe("commands and reads", () => {
  it("publishes, confirms, reads a run, its task's logs and the nodes; a read token may not read logs", async () => {
    await track(
      (async () => {
        const pub = await call(api.base, "POST", "/v1/dags", { body: hello("flow") });
        expect(pub.status, pub.text).toBe(201);
        expect(pub.body).toMatchObject({
          result: "published",
          needsConfirmation: true,
          run: { dagId: "flow", status: "pending", publisher: "http:ops", taskCount: 1 },
        });
        expect(pub.body.commandId).toMatch(/^http\./);
        // The answer's text is plain and names HTTP routes, not chat commands.
        expect(pub.body.text).toContain("Published flow");
        expect(pub.body.text).toContain("POST /v1/runs/flow/confirm");
        expect(pub.body.text).not.toContain("!dag");
        const again = await call(api.base, "POST", "/v1/dags", { body: hello("flow") });
        expect(again.status).toBe(200);
        expect(again.body.result).toBe("exists");

        const wrongHash = await call(api.base, "POST", "/v1/runs/flow/confirm", {
          body: { hash: "00000000" },
        });
        // Not the content the caller reviewed: its own problem naming the run's hash; nothing starts.
        expectProblem(wrongHash, 409, "hash-mismatch");
        expect(wrongHash.body.hash).toBe(pub.body.run.hash);
        expect(wrongHash.body.detail).toContain("content hash");
        expect((await store.getRun(ROOM, "flow"))?.status).toBe("pending");
        const confirm = await call(api.base, "POST", "/v1/runs/flow/confirm", {
          body: { hash: pub.body.run.hash.slice(0, 12) },
        });
        expect(confirm.status, confirm.text).toBe(200);
        expect(confirm.body).toMatchObject({
          result: "done",
          run: { status: "running", confirmedBy: "http:ops" },
        });

        const done = await waitFor(
          "flow succeeded",
          () => call(api.base, "GET", "/v1/runs/flow", { token: READ_TOKEN }),
          (r) => r.body?.run?.status === "succeeded",
        );
        expect(done.body.tasks).toEqual([
          expect.objectContaining({ taskId: "greet", status: "succeeded", node: "h1" }),
        ]);
        expect(done.body.summary).toMatchObject({ total: 1, done: 1, percent: 100 });

        const logs = await call(api.base, "GET", "/v1/runs/flow/tasks/greet/logs");
        expect(logs.status).toBe(200);
        expect(logs.body.output).toBe("hi\n");
        expectProblem(
          await call(api.base, "GET", "/v1/runs/flow/tasks/greet/logs", { token: READ_TOKEN }),
          403,
          "refused",
        );

        const list = await call(api.base, "GET", "/v1/runs", { token: READ_TOKEN });
        expect(list.body.runs.map((r: any) => r.run.dagId)).toContain("flow");
        const nodes = await call(api.base, "GET", "/v1/nodes", { token: READ_TOKEN });
        expect(nodes.body.leader.nodeId).toBe("h1");
        expect(nodes.body.nodes.map((n: any) => n.nodeId)).toEqual(["h1"]);
        // A node without Matrix has no device: the crypto fields say so rather than being absent.
        expect(nodes.body.nodes[0]).toMatchObject({
          undecryptable: 0,
          undecryptableReason: null,
          deviceSigned: null,
        });

        const cancel = await call(api.base, "POST", "/v1/runs/flow/cancel");
        expectProblem(cancel, 409, "wrong-status");
        expect(cancel.body.run.status).toBe("succeeded");
        expectProblem(await call(api.base, "POST", "/v1/runs/flow/retry"), 409, "nothing-to-retry");

        const cap = await call(api.base, "PUT", "/v1/rooms/local/cap", { body: { cap: 7 } });
        expect(cap.status, cap.text).toBe(200);
        expect(cap.body).toMatchObject({ cap: 7 });
        expect(await store.getRoomCap(ROOM)).toBe(7);
      })(),
    );
  }, 30_000);

  it("shows a task's outputs in the run's status and the task's logs, and its dependent got the value", async () => {
    await track(
      (async () => {
        const document = {
          id: "handoff",
          tasks: [
            { id: "make", action: "emit", args: { v: "4.5.6" }, outputs: { version: "[0-9]+(\\.[0-9]+)*" } },
            {
              id: "use",
              action: "echo",
              needs: ["make"],
              args: { message: "got {tasks.make.outputs.version}" },
            },
          ],
        };
        const pub = await call(api.base, "POST", "/v1/dags", { body: { document } });
        expect(pub.status, pub.text).toBe(201);
        const confirm = await call(api.base, "POST", "/v1/runs/handoff/confirm");
        expect(confirm.status, confirm.text).toBe(200);
        const done = await waitFor(
          "handoff succeeded",
          () => call(api.base, "GET", "/v1/runs/handoff", { token: READ_TOKEN }),
          (r) => r.body?.run?.status === "succeeded" || r.body?.run?.status === "failed",
        );
        expect(done.body.run.status, done.text).toBe("succeeded");
        expect(done.body.tasks).toEqual([
          expect.objectContaining({ taskId: "make", outputs: { version: "4.5.6" } }),
          expect.not.objectContaining({ outputs: expect.anything() }),
        ]);
        const make = await call(api.base, "GET", "/v1/runs/handoff/tasks/make/logs");
        expect(make.body.task.outputs).toEqual({ version: "4.5.6" });
        const use = await call(api.base, "GET", "/v1/runs/handoff/tasks/use/logs");
        expect(use.body.output).toBe("got 4.5.6\n");
      })(),
    );
  }, 30_000);

  it("groups a matrix task's instances in the run, reads one instance's logs by its id, and refuses a matrix past its bound", async () => {
    await track(
      (async () => {
        const document = {
          id: "mx",
          tasks: [
            {
              id: "deploy",
              action: "echo",
              matrix: { region: ["eu", "us"], tier: ["web", "db", "cache"] },
              args: { message: "{matrix.region}-{matrix.tier}" },
            },
          ],
        };
        const pub = await call(api.base, "POST", "/v1/dags", { body: { document } });
        expect(pub.status, pub.text).toBe(201);
        expect(pub.body.run.taskCount).toBe(6);
        const confirm = await call(api.base, "POST", "/v1/runs/mx/confirm");
        expect(confirm.status, confirm.text).toBe(200);
        const done = await waitFor(
          "mx ended",
          () => call(api.base, "GET", "/v1/runs/mx", { token: READ_TOKEN }),
          (r) => r.body?.run?.status === "succeeded" || r.body?.run?.status === "failed",
        );
        expect(done.body.run.status, done.text).toBe("succeeded");
        expect(done.body.groups).toEqual([
          { task: "deploy", summary: expect.objectContaining({ total: 6, done: 6 }) },
        ]);
        expect(done.body.groups[0].summary.byStatus.succeeded).toBe(6);
        const instance = encodeURIComponent("deploy[region=us,tier=db]");
        const logs = await call(api.base, "GET", `/v1/runs/mx/tasks/${instance}/logs`);
        expect(logs.status, logs.text).toBe(200);
        expect(logs.body.output).toBe("us-db\n");
        expectProblem(
          await call(api.base, "GET", `/v1/runs/mx/tasks/${encodeURIComponent("deploy[region=us")}/logs`),
          400,
          "bad-request",
        );

        const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
        const tooBig = await call(api.base, "POST", "/v1/dags", {
          body: {
            document: {
              id: "mx_big",
              tasks: [{ id: "t", action: "echo", matrix: { a: values(16), b: values(17) } }],
            },
          },
        });
        expectProblem(tooBig, 422, "invalid-dag");
        expect(tooBig.body.issues.join("\n")).toContain(
          "expands to 272 instances (16 × 17); a matrix task may have at most 256",
        );
        expect(await store.getRun(ROOM, "mx_big")).toBeNull();
      })(),
    );
  }, 30_000);

  it("POST /v1/dags with register: true registers a DAG without running it, confirmed like any publish", async () => {
    await track(
      (async () => {
        // No schedule here (this file's schedule test lists the room's): registering is the same with one.
        const document = {
          id: "nightly_http",
          tasks: [{ id: "greet", action: "echo", args: { message: "hi" } }],
        };
        const pub = await call(api.base, "POST", "/v1/dags", { body: { document, register: true } });
        expect(pub.status, pub.text).toBe(201);
        expect(pub.body).toMatchObject({
          result: "published",
          needsConfirmation: true,
          run: { dagId: "nightly_http", registered: true, taskCount: 0 },
        });
        const confirm = await call(api.base, "POST", "/v1/runs/nightly_http/confirm");
        expect(confirm.status, confirm.text).toBe(200);
        const done = await waitFor(
          "the registering run to end",
          () => call(api.base, "GET", "/v1/runs/nightly_http", { token: READ_TOKEN }),
          (r) => r.body?.run?.status === "succeeded",
        );
        expect(done.body.tasks).toEqual([]);
        // The definition is there and approved by the confirmation, with nothing run.
        const definition = await store.getDefinition(ROOM, "nightly_http");
        expect(definition?.origin).toMatchObject({ status: "succeeded", confirmedBy: "http:ops" });
      })(),
    );
  }, 30_000);

  it("a failed run's status names the failed task with how it ended, and its skipped dependents", async () => {
    await track(
      (async () => {
        // `stubborn` ignores SIGTERM and outlives its 1 s timeout; `after` needs it.
        const document = {
          id: "stalls",
          tasks: [
            { id: "stall", action: "stubborn" },
            { id: "after", action: "echo", args: { message: "never" }, needs: ["stall"] },
          ],
        };
        const pub = await call(api.base, "POST", "/v1/dags", { body: { document } });
        expect(pub.status, pub.text).toBe(201);
        const confirm = await call(api.base, "POST", "/v1/runs/stalls/confirm", {
          body: { hash: pub.body.run.hash.slice(0, 12) },
        });
        expect(confirm.status, confirm.text).toBe(200);
        const ended = await waitFor(
          "stalls failed",
          () => call(api.base, "GET", "/v1/runs/stalls", { token: READ_TOKEN }),
          (r) => r.body?.run?.status === "failed",
          { timeoutMs: 20_000 },
        );
        expect(ended.body.failure).toBe("`stall` timed out after 1s; `after` skipped");
        // A run that did not fail says nothing of the kind.
        const flow = await call(api.base, "GET", "/v1/runs/flow", { token: READ_TOKEN });
        expect(flow.body.run.status).toBe("succeeded");
        expect(flow.body).not.toHaveProperty("failure");
      })(),
    );
  }, 30_000);

  it("answers every error as problem+json with a stable type, and leaves the store as it was", async () => {
    await track(
      (async () => {
        const before = (await allEvents(store)).filter((e) => e.kind === "run.created").length;
        expectProblem(
          await call(api.base, "GET", "/v1/runs/missing", { token: READ_TOKEN }),
          404,
          "run-not-found",
        );
        expectProblem(await call(api.base, "GET", "/v1/runs/flow/tasks/nope/logs"), 404, "task-not-found");
        expectProblem(await call(api.base, "GET", "/v1/nowhere", { token: READ_TOKEN }), 404, "not-found");
        expectProblem(
          await call(api.base, "GET", "/v1/runs?room=!other:example.org", { token: READ_TOKEN }),
          404,
          "unknown-room",
        );
        const badId = await call(api.base, "GET", "/v1/runs/bad%20id", { token: READ_TOKEN });
        expectProblem(badId, 400, "bad-request");
        expect(badId.body.errors[0].path).toMatch(/^params/);
        const unknownKey = await call(api.base, "POST", "/v1/dags", {
          body: { document: {}, shell: "rm -rf /" },
        });
        expectProblem(unknownKey, 400, "bad-request");
        expectProblem(
          await call(api.base, "PUT", "/v1/rooms/local/cap", { body: { cap: -1 } }),
          400,
          "bad-request",
        );
        expectProblem(
          await call(api.base, "PUT", "/v1/rooms/local/cap", { body: { cap: "3; reboot" } }),
          400,
          "bad-request",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/dags", {
            raw: "{not json",
            headers: { "content-type": "application/json" },
          }),
          400,
          "bad-request",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/dags", {
            raw: "id = 1",
            headers: { "content-type": "text/plain" },
          }),
          415,
          "unsupported-media-type",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/dags", {
            raw: '{"__proto__": {"x": 1}, "document": {}}',
            headers: { "content-type": "application/json" },
          }),
          400,
          "bad-request",
        );
        const big = await call(api.base, "POST", "/v1/dags", { body: hello("big", "x".repeat(9000)) });
        expectProblem(big, 413, "body-too-large");

        const invalid = await call(api.base, "POST", "/v1/dags", {
          body: {
            document: {
              id: "cyc",
              tasks: [
                { id: "a", action: "echo", needs: ["b"] },
                { id: "b", action: "echo", needs: ["a"] },
              ],
            },
          },
        });
        expectProblem(invalid, 422, "invalid-dag");
        expect(invalid.body.issues.join("\n")).toMatch(/a -> b -> a|b -> a -> b/);
        const unknownAction = await call(api.base, "POST", "/v1/dags", {
          body: { document: { id: "sh", tasks: [{ id: "a", action: "sh", args: { c: "$(reboot)" } }] } },
        });
        expectProblem(unknownAction, 422, "invalid-dag");
        // A backtick fence in a string cannot end the code block early: the document stays data.
        const fence = await call(api.base, "POST", "/v1/dags", { body: hello("fence", "a```b") });
        expectProblem(fence, 422, "invalid-dag");
        expect(fence.body.issues.join("\n")).toMatch(/message/);
        // A text travels as data: a ``` in it is only a TOML error, never the end of a code block.
        expectProblem(
          await call(api.base, "POST", "/v1/dags", { body: { text: 'id = "t"\n```\n', format: "toml" } }),
          422,
          "invalid-dag",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/dags", { body: { library: "../etc/passwd" } }),
          400,
          "bad-request",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/dags", { body: { library: "nothing-here" } }),
          422,
          "library-error",
        );

        const after = (await allEvents(store)).filter((e) => e.kind === "run.created").length;
        expect(after).toBe(before);
      })(),
    );
  }, 30_000);

  it("answers 16 concurrent POSTs with one Idempotency-Key with one effect and identical answers; another body is a 422", async () => {
    await track(
      (async () => {
        const key = "publish-idem-1";
        const answers = await Promise.all(
          Array.from({ length: 16 }, () =>
            call(api.base, "POST", "/v1/dags", { body: hello("idem"), headers: { "idempotency-key": key } }),
          ),
        );
        expect(new Set(answers.map((a) => a.status))).toEqual(new Set([201]));
        expect(new Set(answers.map((a) => a.text)).size).toBe(1);
        const events = await allEvents(store);
        expect(events.filter((e) => e.kind === "run.created" && e.data["dagId"] === "idem")).toHaveLength(1);
        expect(
          events.filter(
            (e) => e.kind === "inbox.inserted" && e.data["eventId"] === answers[0]!.body.commandId,
          ),
        ).toHaveLength(1);

        // Later, with the run confirmed and moved on, the same key and body still get the first answer.
        const confirmKey = { "idempotency-key": "confirm-idem-1" };
        const first = await call(api.base, "POST", "/v1/runs/idem/confirm", { headers: confirmKey });
        expect(first.status, first.text).toBe(200);
        await waitFor(
          "idem succeeded",
          () => store.getRun(ROOM, "idem"),
          (r) => r?.status === "succeeded",
        );
        const repeat = await call(api.base, "POST", "/v1/runs/idem/confirm", { headers: confirmKey });
        expect(repeat.text).toBe(first.text);
        expect(repeat.body.result).toBe("done");
        // Without the key the same command is a new one, answered "already".
        const fresh = await call(api.base, "POST", "/v1/runs/idem/confirm");
        expect(fresh.body.result).toBe("already");

        // Retention forgets the command's inbox row; the key is kept: a repeat gets the kept answer and
        // is not run again.
        const db = new Database(target.store.slice("sqlite:".length));
        expect(
          db.prepare("DELETE FROM processed_events WHERE event_id = ?").run(answers[0]!.body.commandId)
            .changes,
        ).toBe(1);
        db.close();
        const afterPrune = await call(api.base, "POST", "/v1/dags", {
          body: hello("idem"),
          headers: { "idempotency-key": key },
        });
        expect(afterPrune.text).toBe(answers[0]!.text);
        expect(await store.getInboxEvent(answers[0]!.body.commandId)).toBeNull();
        expect(
          (await allEvents(store)).filter((e) => e.kind === "run.created" && e.data["dagId"] === "idem"),
        ).toHaveLength(1);

        const other = await call(api.base, "POST", "/v1/dags", {
          body: hello("idem-other"),
          headers: { "idempotency-key": key },
        });
        expectProblem(other, 422, "idempotency-key-reused");
        expect(await store.getRun(ROOM, "idem-other")).toBeNull();
        // A different key of the same caller is another request; the read token's keys are its own.
        expectProblem(
          await call(api.base, "POST", "/v1/dags", {
            body: hello("x"),
            headers: { "idempotency-key": "bad key with spaces" },
          }),
          400,
          "bad-idempotency-key",
        );
      })(),
    );
  }, 30_000);

  it("serves at most max_streams event streams at once: one more is a 503 saying when to retry", async () => {
    const open = [new SseClient(api.port, "/v1/events", { authorization: `Bearer ${READ_TOKEN}` })];
    open.push(new SseClient(api.port, "/v1/events", { authorization: `Bearer ${READ_TOKEN}` }));
    try {
      await waitFor(
        "two streams",
        () => open.map((c) => c.events.length),
        (n) => n.every((x) => x >= 1),
      );
      const third = await call(api.base, "GET", "/v1/events", { token: READ_TOKEN });
      expectProblem(third, 503, "too-many-streams");
      expect(third.headers.get("retry-after")).toBe("5");
      open.shift()!.close();
      await waitFor(
        "a place freed",
        async () => {
          const c = new SseClient(api.port, "/v1/events", { authorization: `Bearer ${READ_TOKEN}` });
          await waitFor(
            "an answer",
            () => c.status,
            (st) => st !== 0,
          );
          open.push(c);
          return c.status;
        },
        (st) => st === 200,
      );
    } finally {
      for (const c of open) c.close();
    }
  });

  it("lists schedules and pauses, resumes and deletes one; an unknown one is a 404, a deleted one cannot be resumed", async () => {
    await track(
      (async () => {
        const doc = {
          document: {
            id: "nightly",
            schedule: "0 3 * * *",
            tasks: [{ id: "a", action: "echo", args: { message: "x" } }],
          },
        };
        expect((await call(api.base, "POST", "/v1/dags", { body: doc })).status).toBe(201);
        const listed = await call(api.base, "GET", "/v1/schedules");
        expect(listed.status, listed.text).toBe(200);
        expect(listed.body.schedules).toEqual([
          expect.objectContaining({
            dagId: "nightly",
            cron: "0 3 * * *",
            state: "active",
            owner: "http:ops",
          }),
        ]);
        const paused = await call(api.base, "POST", "/v1/schedules/nightly/pause", {
          body: { reason: "maintenance" },
        });
        expect(paused.status, paused.text).toBe(200);
        expect(paused.body).toMatchObject({
          action: "pause",
          result: "done",
          state: "paused",
          by: "http:ops",
        });
        expect(paused.body.text).not.toContain("!dag");
        const shown = (await call(api.base, "GET", "/v1/schedules")).body.schedules[0];
        expect(shown).toMatchObject({
          state: "paused",
          pausedBy: "http:ops",
          reason: "maintenance",
          next: null,
        });
        const again = await call(api.base, "POST", "/v1/schedules/nightly/pause", { body: null });
        expect(again.body).toMatchObject({ result: "already", state: "paused" });
        const resumed = await call(api.base, "POST", "/v1/schedules/nightly/resume", { body: null });
        expect(resumed.body).toMatchObject({ result: "done", state: "active" });
        const deleted = await call(api.base, "DELETE", "/v1/schedules/nightly", { body: null });
        expect(deleted.status, deleted.text).toBe(200);
        expect(deleted.body).toMatchObject({ action: "delete", state: "deleted" });
        expectProblem(
          await call(api.base, "POST", "/v1/schedules/nightly/resume", { body: null }),
          409,
          "schedule-deleted",
        );
        expectProblem(
          await call(api.base, "POST", "/v1/schedules/nosuch/pause", { body: null }),
          404,
          "schedule-not-found",
        );
        expect((await call(api.base, "GET", "/v1/schedules")).body.schedules).toEqual([]);
        const events = (await allEvents(store)).filter((e) => e.kind.startsWith("schedule."));
        expect(events.map((e) => e.kind)).toEqual([
          "schedule.paused",
          "schedule.resumed",
          "schedule.deleted",
        ]);
      })(),
    );
  });

  it("lists the DAGs that run after another; publishing refuses a cycle of after links and a mapping to a parameter the upstream does not declare", async () => {
    await track(
      (async () => {
        const publish = (document: Record<string, unknown>) =>
          call(api.base, "POST", "/v1/dags", { body: { document } });
        const tasks = [{ id: "a", action: "echo", args: { message: "x" } }];
        expect(
          (await publish({ id: "up", params: { v: { pattern: "[0-9]+", default: "1" } }, tasks })).status,
        ).toBe(201);
        const down = await publish({
          id: "down",
          params: { version: { pattern: "[0-9]+", default: "0" } },
          after: { dag: "up", status: ["succeeded", "failed"], params: { version: "params.v" } },
          tasks,
        });
        expect(down.status, down.text).toBe(201);
        const wrong = await publish({
          id: "wrong",
          params: { version: { pattern: "[0-9]+", default: "0" } },
          after: { dag: "up", params: { version: "params.nope" } },
          tasks,
        });
        expectProblem(wrong, 422, "invalid-dag");
        expect(JSON.stringify(wrong.body.issues)).toContain('up declares no parameter \\"nope\\"');
        // p after q is allowed before q exists; q after p would close the cycle p → q → p.
        expect((await publish({ id: "p", after: { dag: "q" }, tasks })).status).toBe(201);
        const cycle = await publish({ id: "q", after: { dag: "p" }, tasks });
        expectProblem(cycle, 422, "invalid-dag");
        expect(JSON.stringify(cycle.body.issues)).toContain("q → p → q");
        expect(await store.getDefinition(ROOM, "q")).toBeNull();

        const listed = await call(api.base, "GET", "/v1/triggers");
        expect(listed.status, listed.text).toBe(200);
        expect(listed.body.triggers).toEqual([
          expect.objectContaining({
            dagId: "down",
            after: "up",
            status: ["succeeded", "failed"],
            params: { version: "params.v" },
            owner: "http:ops",
            // Its published run awaits confirmation: it fires once confirmed.
            active: false,
          }),
          expect.objectContaining({ dagId: "p", after: "q", status: ["succeeded"], last: null }),
        ]);
        expect(listed.body.text).not.toContain("!dag");
      })(),
    );
  });

  it("serves an OpenAPI 3.1 document generated from the route schemas", async () => {
    const doc = await call(api.base, "GET", "/openapi.json", { token: null });
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe("3.1.0");
    const paths = Object.keys(doc.body.paths).sort();
    expect(paths).toEqual(
      [
        "/healthz",
        "/readyz",
        "/v1/dags",
        "/v1/edge/claim",
        "/v1/edge/finish",
        "/v1/edge/finish-and-claim",
        "/v1/edge/heartbeat",
        "/v1/edge/held",
        "/v1/edge/leave",
        "/v1/edge/output",
        "/v1/edge/release",
        "/v1/edge/renew",
        "/v1/edge/task",
        "/v1/edge/tasks",
        "/v1/edge/wakes",
        "/v1/events",
        "/v1/nodes",
        "/v1/rooms/{room}/cap",
        "/v1/rooms/{room}/policy",
        "/v1/rooms/{room}/policy/{change}/confirm",
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/cancel",
        "/v1/runs/{id}/confirm",
        "/v1/runs/{id}/gates/{task}/approve",
        "/v1/runs/{id}/gates/{task}/deny",
        "/v1/runs/{id}/reject",
        "/v1/runs/{id}/retry",
        "/v1/runs/{id}/tasks/{task}/logs",
        "/v1/runs/{id}/tasks/{task}/mark",
        "/v1/schedules",
        "/v1/schedules/{id}",
        "/v1/schedules/{id}/pause",
        "/v1/schedules/{id}/resume",
        "/v1/triggers",
      ].sort(),
    );
    const cap = doc.body.paths["/v1/rooms/{room}/cap"].put;
    expect(cap.requestBody.content["application/json"].schema).toMatchObject({
      type: "object",
      properties: { cap: { type: "integer", minimum: 0 } },
      required: ["cap"],
      additionalProperties: false,
    });
    expect(Object.keys(cap.responses)).toEqual(expect.arrayContaining(["200", "4XX", "5XX"]));
    expect(doc.body.components.securitySchemes.bearer).toEqual({ type: "http", scheme: "bearer" });
    // Valid against the official OpenAPI 3.1 schema.
    const validator = new Validator();
    const result = await validator.validate(doc.body);
    expect(result.errors ?? [], JSON.stringify(result.errors ?? []).slice(0, 1000)).toEqual([]);
    expect(result.valid).toBe(true);
    // Every operation has responses and every $ref resolves inside the document.
    const refs = JSON.stringify(doc.body).match(/"\$ref":"#\/[^"]+"/g) ?? [];
    for (const ref of refs) {
      const path = ref.slice(10, -1).split("/");
      let at: any = doc.body;
      for (const p of path) at = at?.[p];
      expect(at, ref).toBeDefined();
    }
  });

  it("counts commands by verb and outcome and tasks by final state in /metrics", async () => {
    const text = (await call(api.base, "GET", "/metrics", { token: READ_TOKEN })).text;
    expect(text).toMatch(/dagbot_commands_total\{verb="publish",outcome="published"\} [1-9]/);
    expect(text).toMatch(/dagbot_commands_total\{verb="confirm",outcome="decision-done"\} [1-9]/);
    expect(text).toMatch(/dagbot_tasks_finished_total\{state="succeeded"\} [1-9]/);
    expect(text).toMatch(/dagbot_task_claim_latency_seconds_count [1-9]/);
    expect(text).toMatch(/dagbot_http_requests_total\{route="\/v1\/dags",method="POST",status="201"\} [1-9]/);
    expect(text).toMatch(/dagbot_queue_depth\{room="local"\} 0/);
    expect(text).toMatch(/dagbot_process_resident_memory_bytes \d+/);
    // Low cardinality: no run ids or event ids in any label.
    expect(text).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-|http\.[0-9a-f]{20}/);
  });
});

describe("run ids", () => {
  it("takes a run's name or its uuid in every route and the event stream, and shows its name; an unknown run's stream is a 404", async () => {
    await track(
      (async () => {
        const pub = await call(api.base, "POST", "/v1/dags", { body: hello("ids") });
        expect(pub.status, pub.text).toBe(201);
        const uuid = pub.body.run.runId as string;
        const byUuid = await call(api.base, "GET", `/v1/runs/${uuid}`, { token: READ_TOKEN });
        expect(byUuid.status, byUuid.text).toBe(200);
        expect(byUuid.body.run).toMatchObject({ dagId: "ids", runId: uuid });
        const confirm = await call(api.base, "POST", `/v1/runs/${uuid.toUpperCase()}/confirm`);
        expect(confirm.status, confirm.text).toBe(200);
        expect(confirm.body.run.dagId).toBe("ids");
        await waitFor(
          "ids succeeded",
          () => store.getRun(ROOM, "ids"),
          (r) => r?.status === "succeeded",
        );
        const logs = await call(api.base, "GET", `/v1/runs/${uuid}/tasks/greet/logs`);
        expect(logs.status, logs.text).toBe(200);
        expect(logs.body.run.dagId).toBe("ids");

        const auth = { authorization: `Bearer ${READ_TOKEN}` };
        const byName = new SseClient(api.port, "/v1/events?after=0&run=ids", auth);
        await waitFor(
          "the run's events by its name",
          () => byName.events.some((e) => e.data?.kind === "run.succeeded"),
          (found) => found,
        );
        byName.close();
        expect(byName.events.length).toBeGreaterThan(2);
        // Each line names the run by its canonical id as well as its uuid.
        expect(byName.events.every((e) => e.data.runId === uuid && e.data.dagId === "ids")).toBe(true);
        // Every line is named by its kind (EventSource listeners by kind), its id the log's seq.
        expect(byName.events.map((e) => e.event)).toEqual(byName.events.map((e) => e.data.kind));
        expect(byName.events.every((e) => typeof e.id === "number" && e.id > 0)).toBe(true);
        const snapshot = new SseClient(api.port, `/v1/events?run=${uuid}`, auth);
        await waitFor(
          "a snapshot of the run by its uuid",
          () => snapshot.events.length,
          (n) => n >= 1,
        );
        snapshot.close();
        expect(snapshot.events[0]).toMatchObject({ event: "snapshot", data: { run: { dagId: "ids" } } });

        expectProblem(
          await call(api.base, "GET", "/v1/events?run=nope", { token: READ_TOKEN }),
          404,
          "run-not-found",
        );
        expectProblem(
          await call(api.base, "GET", "/v1/runs/00000000-0000-4000-8000-000000000000"),
          404,
          "run-not-found",
        );
      })(),
    );
  });
});

describe("HTTP conventions", () => {
  it("answers a wrong method on a known path with 405 and an Allow header; an unknown path stays a 404", async () => {
    await track(
      (async () => {
        const cases: Array<[string, string, string]> = [
          ["DELETE", "/v1/runs", "GET, HEAD, POST"],
          ["POST", "/v1/runs/flow", "GET, HEAD"],
          ["GET", "/v1/dags", "POST"],
          ["GET", "/v1/runs/flow/confirm", "POST"],
          ["POST", "/v1/events", "GET, HEAD"],
          ["DELETE", `/v1/rooms/${encodeURIComponent(ROOM)}/cap`, "PUT"],
        ];
        for (const [method, path, allow] of cases) {
          const r = await call(api.base, method, path);
          expectProblem(r, 405, "method-not-allowed");
          expect(r.headers.get("allow"), `${method} ${path}`).toBe(allow);
        }
        const missing = await call(api.base, "GET", "/v1/nothing-here");
        expectProblem(missing, 404, "not-found");
        expect(missing.headers.get("allow")).toBeNull();
      })(),
    );
  });
});

describe("run lists", () => {
  it("pages runs with limit and an opaque cursor (in the body and a Link header), unmoved by new runs; filters by status and DAG; refuses bad values", async () => {
    await track(
      (async () => {
        expect((await call(api.base, "POST", "/v1/dags", { body: hello("pages") })).status).toBe(201);
        for (let i = 0; i < 3; i++) {
          const more = await call(api.base, "POST", "/v1/runs", { body: { dagId: "pages" } });
          expect(more.status, more.text).toBe(201);
        }
        const ids = (r: JsonResponse): string[] => r.body.runs.map((x: any) => x.run.dagId);
        const first = await call(api.base, "GET", "/v1/runs?dag=pages&limit=2", { token: READ_TOKEN });
        expect(first.status, first.text).toBe(200);
        expect(ids(first)).toEqual(["pages.4", "pages.3"]);
        expect(first.body.next).toEqual(expect.any(String));
        const link = first.headers.get("link") ?? "";
        expect(link).toMatch(/^<\/v1\/runs\?[^>]*cursor=[^>]+>; rel="next"$/);
        // A run created between two pages does not shift the next one.
        expect((await call(api.base, "POST", "/v1/runs", { body: { dagId: "pages" } })).status).toBe(201);
        const second = await call(api.base, "GET", link.slice(1, link.indexOf(">")), { token: READ_TOKEN });
        expect(second.status, second.text).toBe(200);
        expect(ids(second)).toEqual(["pages.2", "pages"]);
        expect(second.body.next).toBeNull();
        expect(second.headers.get("link")).toBeNull();
        const fromBody = await call(api.base, "GET", `/v1/runs?dag=pages&limit=2&cursor=${first.body.next}`, {
          token: READ_TOKEN,
        });
        expect(ids(fromBody)).toEqual(["pages.2", "pages"]);

        const pending = await call(api.base, "GET", "/v1/runs?dag=pages&status=pending,running&limit=100", {
          token: READ_TOKEN,
        });
        expect(ids(pending)).toEqual(["pages.5", "pages.4", "pages.3", "pages.2", "pages"]);
        expect(
          ids(await call(api.base, "GET", "/v1/runs?dag=pages&status=failed", { token: READ_TOKEN })),
        ).toEqual([]);
        const all = await call(api.base, "GET", "/v1/runs?limit=100&status=pending", { token: READ_TOKEN });
        expect(ids(all).slice(0, 5)).toEqual(["pages.5", "pages.4", "pages.3", "pages.2", "pages"]);
        expect(all.body.runs.every((x: any) => x.run.status === "pending")).toBe(true);

        for (const bad of ["limit=0", "limit=101", "limit=x", "status=bogus", "status=pending,", "dag=a%20b"])
          expectProblem(
            await call(api.base, "GET", `/v1/runs?${bad}`, { token: READ_TOKEN }),
            400,
            "bad-request",
          );
        expectProblem(
          await call(api.base, "GET", "/v1/runs?cursor=bm90LWEtY3Vyc29y", { token: READ_TOKEN }),
          400,
          "command-error",
        );
        expectProblem(
          await call(api.base, "GET", "/v1/runs?dag=nope", { token: READ_TOKEN }),
          404,
          "run-not-found",
        );
      })(),
    );
  });
});

describe("a write no leader answers in time", () => {
  it("is a 504 with its command id; retried with the same Idempotency-Key once a leader is there, it gets the answer", async () => {
    const t = await createTarget("sqlite", "http-timeout");
    const s2 = await t.open();
    let ok = false;
    const strict = "\n[permissions]\npower_level = 60\n";
    let leader = startNode(t, writeNodeConfig(t, { nodeId: "strict", extra: strict }), "strict");
    let follower: HttpNode | null = null;
    try {
      await waitFor(
        "the room's policy set",
        () => s2.getRoomPolicy(ROOM),
        (p) => p?.policy.powerLevel === 60,
        {
          timeoutMs: 15_000,
        },
      );
      // This node's config states another power level than the room's: it serves HTTP but never leads.
      follower = await startHttpNode(t, "lax", {
        extra: 'command_timeout = "1s"',
        tables: "\n[permissions]\npower_level = 50\n",
      });
      // The leader freezes while it still holds the lease (never inside a write transaction, which
      // would keep the follower's write out): the command is queued, and nobody answers.
      await freezeOutsideWrite((signal) => leader.kill(signal), t);
      const key = { "idempotency-key": "late-1" };
      const late = await call(follower.base, "POST", "/v1/dags", { body: hello("late"), headers: key });
      expectProblem(late, 504, "leader-timeout");
      expect(late.body.commandId).toMatch(/^http\./);
      expect(await s2.getRun(ROOM, "late")).toBeNull();
      leader.kill("SIGKILL");
      await leader.exited;
      // With the lease gone, a node held back by its [permissions] refuses at once, naming the fix.
      await waitFor(
        "the lease to expire",
        () => s2.getLease(ROOM),
        (l) => l === null || l.expiresAt <= l.now,
      );
      const held = await call(follower.base, "POST", "/v1/dags", { body: hello("held") });
      expectProblem(held, 503, "not-leader");
      expect(held.body.detail).toContain(`dagbot policy power_level 50 --room ${ROOM}`);
      expect(await s2.getRun(ROOM, "held")).toBeNull();

      leader = startNode(t, writeNodeConfig(t, { nodeId: "strict", extra: strict }), "strict");
      await waitFor(
        "the run published",
        () => s2.getRun(ROOM, "late"),
        (r) => r !== null,
        { timeoutMs: 15_000 },
      );
      const again = await call(follower.base, "POST", "/v1/dags", { body: hello("late"), headers: key });
      expect(again.status, again.text).toBe(201);
      expect(again.body.commandId).toBe(late.body.commandId);
      expect(again.body.result).toBe("published");
      expect((await allEvents(s2)).filter((e) => e.kind === "run.created")).toHaveLength(1);
      ok = true;
    } finally {
      await killAll([leader, ...(follower === null ? [] : [follower.node])]);
      await s2.close();
      await t.cleanup(!ok);
    }
  }, 60_000);
});
