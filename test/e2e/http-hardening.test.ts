// The HTTP API's hardening (docs/architecture.md §8, docs/security.md) on real `dagbot node` processes, real stores and
// real sockets: /readyz says what is wrong only to a caller with a token; a body nested too deep is a
// 400; a token limited to rooms cannot see or act on the node's other rooms; the connection cap and
// the header timeout close what they should.
import { createHash } from "node:crypto";
import { connect } from "node:net";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import { createTarget, killAll, requireBuild, targetIn } from "../support/engine-cluster.js";
import type { JsonResponse } from "../support/http-client.js";
import { OPERATE_TOKEN, READ_TOKEN, SseClient, call, startHttpNode } from "../support/http-client.js";
import type { TestDatabase } from "../support/postgres.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";
import { freePort, startProxy } from "../support/tcp-proxy.js";

const ROOM_A = "!alpha:example.org";
const ROOM_B = "!bravo:example.org";
const A_TOKEN = "room-a-token-0123456789abcdef-test";
const sha = (t: string): string => createHash("sha256").update(t).digest("hex");

const nodes: NodeProcess[] = [];
const cleanups: Array<(failed: boolean) => Promise<void>> = [];
let failed = false;

beforeAll(() => requireBuild());

afterAll(async () => {
  await killAll(nodes);
  for (const c of cleanups.reverse()) await c(failed);
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
  expect(r.body).toMatchObject({ type: `urn:dagbot:problem:${code}`, status, code });
}

const q = (room: string): string => `room=${encodeURIComponent(room)}`;

describe("a node with a plain config", () => {
  let base = "";
  let port = 0;
  let proxy: { close(): Promise<void> };

  beforeAll(async () => {
    const db: TestDatabase = await createTestDatabase();
    cleanups.push((f) => dropOrKeep(db, f));
    // The node reaches PostgreSQL through a proxy the readiness test takes down: the store "goes away".
    port = await freePort();
    proxy = await startProxy(port, 5432);
    cleanups.push(() => proxy.close());
    const url = new URL(db.url);
    url.port = String(port);
    const target = targetIn("postgres", "http-plain", url.toString(), "HTTP test folder");
    cleanups.push((f) => target.cleanup(f));
    const api = await startHttpNode(target, "plain1");
    nodes.push(api.node);
    base = api.base;
    await waitFor(
      "ready",
      () => call(base, "GET", "/readyz", { token: null }),
      (r) => r.status === 200,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
  }, 30_000);

  it("answers a body nested deeper than the parser takes with a 400, and keeps serving", async () => {
    await track(
      (async () => {
        const depth = 50_000;
        const deepArray = `${"[".repeat(depth)}${"]".repeat(depth)}`;
        expectProblem(
          await call(base, "POST", "/v1/dags", {
            raw: deepArray,
            headers: { "content-type": "application/json" },
          }),
          400,
          "bad-request",
        );
        const deepArg = `{"document":{"id":"deep","tasks":[{"id":"greet","action":"echo","args":{"message":${'{"a":'.repeat(depth / 2)}1${"}".repeat(depth / 2)}}}]}}`;
        const r = await call(base, "POST", "/v1/dags", {
          raw: deepArg,
          headers: { "content-type": "application/json" },
        });
        expectProblem(r, 400, "bad-request");
        expect(r.body.detail).toMatch(/nested deeper than \d+ levels/);
        // Brackets inside strings are not nesting.
        const brackets = await call(base, "POST", "/v1/dags", {
          body: {
            document: {
              id: "brackets",
              tasks: [{ id: "greet", action: "echo", args: { message: "[".repeat(200) } }],
            },
          },
        });
        expect(brackets.status).not.toBe(500);
        expect(brackets.body.code).not.toBe("bad-request");
        expect((await call(base, "GET", "/v1/runs")).status).toBe(200);
      })(),
    );
  }, 30_000);

  it("/readyz tells a caller without a token only which check fails; a token gets what is wrong", async () => {
    await track(
      (async () => {
        await proxy.close();
        const open = await waitFor(
          "not ready",
          () => call(base, "GET", "/readyz", { token: null }),
          (r) => r.status === 503,
          { timeoutMs: 15_000, intervalMs: 100 },
        );
        expect(open.body).toEqual({ ok: false, checks: { store: "failing" } });
        expect(open.text).not.toContain(String(port));
        expect(open.text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|error/i);
        const bad = await call(base, "GET", "/readyz", { token: "not-a-configured-token-xxxx" });
        expect(bad.body).toEqual({ ok: false, checks: { store: "failing" } });

        const withToken = await call(base, "GET", "/readyz", { token: READ_TOKEN });
        expect(withToken.status).toBe(503);
        expect(withToken.body.ok).toBe(false);
        expect(withToken.body.checks.store).toMatch(/^unreachable: .*ECONNREFUSED 127\.0\.0\.1:\d+/);

        proxy = await startProxy(port, 5432);
        await waitFor(
          "ready again",
          () => call(base, "GET", "/readyz", { token: null }),
          (r) => r.status === 200,
          { timeoutMs: 20_000, intervalMs: 200 },
        );
      })(),
    );
  }, 60_000);
});

describe("bodies and room-limited tokens", () => {
  let target: Target;
  let store: Store;
  let base = "";

  beforeAll(async () => {
    target = await createTarget("sqlite", "http-rooms");
    cleanups.push((f) => target.cleanup(f));
    const api = await startHttpNode(target, "rooms1", {
      tables: [
        "[[http.tokens]]",
        'name = "alpha_ops"',
        `sha256 = "${sha(A_TOKEN)}"`,
        'level = "operate"',
        `rooms = ["${ROOM_A}"]`,
        "[matrix]",
        'homeserver_url = "http://127.0.0.1:9"',
        'user_id = "@bot:example.org"',
        'access_token = "unused-by-an-engine-node"',
        `rooms = ["${ROOM_A}", "${ROOM_B}"]`,
      ].join("\n"),
    });
    nodes.push(api.node);
    base = api.base;
    store = await target.open();
    cleanups.push(() => store.close());
    for (const room of [ROOM_A, ROOM_B]) {
      await waitFor(
        `leading ${room}`,
        () => store.getLease(room),
        (l) => l?.holder?.nodeId === "rooms1",
        { timeoutMs: 15_000, intervalMs: 50 },
      );
    }
  }, 30_000);

  it("a token limited to a room works there; another room is answered as if the node did not serve it", async () => {
    await track(
      (async () => {
        const hello = (id: string) => ({
          document: { id, tasks: [{ id: "greet", action: "echo", args: { message: "hi" } }] },
        });
        const own = await call(base, "POST", `/v1/dags?${q(ROOM_A)}`, {
          token: A_TOKEN,
          body: hello("mine"),
        });
        expect(own.status, own.text).toBe(201);
        expect(own.body.run.publisher).toBe("http:alpha_ops");
        expect((await call(base, "GET", `/v1/runs?${q(ROOM_A)}`, { token: A_TOKEN })).status).toBe(200);

        // What a room the node does not serve looks like, to compare with.
        const none = await call(base, "GET", `/v1/runs?${q("!nowhere:example.org")}`, { token: A_TOKEN });
        expectProblem(none, 404, "unknown-room");
        const other = await call(base, "GET", `/v1/runs?${q(ROOM_B)}`, { token: A_TOKEN });
        expectProblem(other, 404, "unknown-room");
        expect(other.body.detail).toBe(none.body.detail.replace("!nowhere:example.org", ROOM_B));
        expect(other.body.title).toBe(none.body.title);

        const pub = await call(base, "POST", `/v1/dags?${q(ROOM_B)}`, {
          token: A_TOKEN,
          body: hello("theirs"),
        });
        expectProblem(pub, 404, "unknown-room");
        expect(await store.getRun(ROOM_B, "theirs")).toBeNull();
        expectProblem(
          await call(base, "PUT", `/v1/rooms/${encodeURIComponent(ROOM_B)}/cap`, {
            token: A_TOKEN,
            body: { cap: 0 },
          }),
          404,
          "unknown-room",
        );
        expectProblem(
          await call(base, "GET", `/v1/nodes?${q(ROOM_B)}`, { token: A_TOKEN }),
          404,
          "unknown-room",
        );
        const stream = new SseClient(Number(new URL(base).port), `/v1/events?${q(ROOM_B)}`, {
          authorization: `Bearer ${A_TOKEN}`,
        });
        await waitFor(
          "the stream's answer",
          () => stream.status,
          (s) => s !== 0,
        );
        expect(stream.status).toBe(404);
        stream.close();
        // Metrics name every room of the node: not for a token limited to some.
        expectProblem(await call(base, "GET", "/metrics", { token: A_TOKEN }), 403, "forbidden");

        // An unlimited token still reaches both rooms.
        expect((await call(base, "GET", `/v1/runs?${q(ROOM_B)}`, { token: OPERATE_TOKEN })).status).toBe(200);
        const theirs = await call(base, "POST", `/v1/dags?${q(ROOM_B)}`, { body: hello("theirs") });
        expect(theirs.status, theirs.text).toBe(201);
        expect(await store.getRun(ROOM_A, "theirs")).toBeNull();
      })(),
    );
  }, 30_000);
});

/** Sends a whole request on a raw socket and resolves with the status line's code (0: closed without one). */
function rawRequest(socket: Socket, path: string): Promise<number> {
  return new Promise((resolve) => {
    let text = "";
    const done = (): void => {
      socket.off("data", onData);
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0));
    };
    const onData = (chunk: Buffer): void => {
      text += chunk.toString("utf8");
      if (/\r\n\r\n[\s\S]*\}/.test(text)) done();
    };
    socket.on("data", onData);
    socket.once("close", done);
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n`);
  });
}

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => resolve(s));
    s.once("error", reject);
  });
}

describe("connections", () => {
  it("closes a connection past max_connections at once, and one whose headers take longer than header_timeout", async () => {
    await track(
      (async () => {
        const target = await createTarget("sqlite", "http-conns");
        cleanups.push((f) => target.cleanup(f));
        const api = await startHttpNode(target, "conns1", {
          extra: [
            "max_streams = 1",
            "max_connections = 3",
            'header_timeout = "1s"',
            'keep_alive_timeout = "60s"',
          ].join("\n"),
        });
        nodes.push(api.node);

        // Three kept-alive connections, each answered once: the cap is reached.
        const held: Socket[] = [];
        for (let i = 0; i < 3; i += 1) {
          const s = await openSocket(api.port);
          held.push(s);
          expect(await rawRequest(s, "/healthz")).toBe(200);
        }
        const extra = await openSocket(api.port).catch(() => null);
        if (extra !== null) {
          extra.on("error", () => {});
          expect(await rawRequest(extra, "/healthz")).toBe(0);
          expect(extra.destroyed || extra.readableEnded).toBe(true);
        }
        // The three still work.
        for (const s of held) expect(await rawRequest(s, "/healthz")).toBe(200);

        // One leaves: a new connection is served again.
        held.pop()!.destroy();
        await waitFor(
          "a connection served after one left",
          async () => {
            const s = await openSocket(api.port);
            s.on("error", () => {});
            const status = await rawRequest(s, "/healthz");
            if (status === 200) held.push(s);
            else s.destroy();
            return status;
          },
          (status) => status === 200,
          { timeoutMs: 10_000, intervalMs: 100 },
        );
        for (const s of held.splice(0)) s.destroy();

        // Headers sent slowly: the connection is closed (408) once header_timeout has passed.
        const slow = await waitFor(
          "a free slot",
          () => openSocket(api.port),
          () => true,
        );
        let answer = "";
        slow.on("data", (c: Buffer) => (answer += c.toString("utf8")));
        slow.on("error", () => {});
        const closed = new Promise<void>((resolve) => slow.once("close", () => resolve()));
        slow.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n");
        const keepTrickling = setInterval(() => {
          if (!slow.destroyed) slow.write("x-slow: 1\r\n");
        }, 200);
        await closed.finally(() => clearInterval(keepTrickling));
        expect(answer).not.toMatch(/^HTTP\/1\.1 200/);
      })(),
    );
  }, 60_000);
});
